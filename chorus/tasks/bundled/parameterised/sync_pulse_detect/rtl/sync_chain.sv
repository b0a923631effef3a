// STAGES-deep flip-flop synchronizer for one asynchronous bit; BIT is the
// index of the input bit it serves.
module sync_chain #(
    parameter int STAGES = 3,
    parameter int BIT    = 0
) (
    input  logic clk,
    input  logic rst_n,
    input  logic d,
    output logic q
);
    logic [STAGES-1:0] ff;

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n)
            ff <= '0;
        else
            ff <= {ff[STAGES-2:0], d};
    end

    assign q = ff[STAGES-1];
endmodule
