// One pipeline stage: a data register with a valid bit, a local stall
// request and a flush. Stage IDX adds (IDX+1) to the data it carries.
module pipe_stage #(
    parameter int W   = 8,
    parameter int IDX = 0
) (
    input  logic         clk,
    input  logic         rst_n,
    input  logic         flush,
    input  logic         stall_req,
    input  logic         in_valid,
    input  logic [W-1:0] in_data,
    output logic         in_ready,
    output logic         out_valid,
    output logic [W-1:0] out_data,
    input  logic         out_ready
);
    localparam logic [W-1:0] INC = W'(IDX + 1);

    // Accept new content when not stalled and the register is empty or draining.
    assign in_ready = !stall_req && (!out_valid || out_ready);

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            out_valid <= 1'b0;
            out_data  <= '0;
        end else if (flush) begin
            out_valid <= 1'b0;
        end else if (in_ready) begin
            out_valid <= in_valid;
            if (in_valid)
                out_data <= in_data + INC;
        end else if (out_ready && stall_req) begin
            // stalled stage whose content was taken: it becomes a bubble
            out_valid <= 1'b0;
        end
    end
endmodule
