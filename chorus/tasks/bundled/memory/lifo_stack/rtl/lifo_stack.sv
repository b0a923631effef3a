// LIFO stack of DEPTH words with push, pop, push+pop (replace top), a peek
// port reading any entry relative to the top, and sticky overflow and
// underflow flags. Illegal operations leave the stack unchanged.
module lifo_stack #(
    parameter int DEPTH = 32,
    parameter int W     = 8
) (
    input  logic                     clk,
    input  logic                     rst_n,
    input  logic                     push,
    input  logic                     pop,
    input  logic [W-1:0]             din,
    input  logic                     clear_err,
    input  logic [$clog2(DEPTH)-1:0] peek_depth,
    output logic [W-1:0]             top,
    output logic [W-1:0]             peek_data,
    output logic                     peek_err,
    output logic [$clog2(DEPTH):0]   count,
    output logic                     empty,
    output logic                     full,
    output logic                     overflow,
    output logic                     underflow
);
    localparam int CW = $clog2(DEPTH) + 1;
    localparam int PW = $clog2(DEPTH);

    logic [W-1:0] mem [0:DEPTH-1];
    logic [CW-1:0] peek_pos;

    assign empty = (count == '0);
    assign full  = (count == CW'(DEPTH));
    assign top   = empty ? '0 : mem[PW'(count - 1'b1)];

    // peek: entry peek_depth below the top (0 = top)
    assign peek_err  = ({1'b0, peek_depth} >= count);
    assign peek_pos  = count - 1'b1 - {1'b0, peek_depth};
    assign peek_data = peek_err ? '0 : mem[peek_pos[PW-1:0]];

    always_ff @(posedge clk) begin
        if (push && pop && !empty)
            mem[PW'(count - 1'b1)] <= din;      // replace the top entry
        else if (push && !pop && !full)
            mem[PW'(count)] <= din;
    end

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            count     <= '0;
            overflow  <= 1'b0;
            underflow <= 1'b0;
        end else begin
            if (clear_err) begin
                overflow  <= 1'b0;
                underflow <= 1'b0;
            end
            if (push && pop) begin
                if (empty)
                    underflow <= 1'b1;          // nothing to replace
            end else if (push) begin
                if (full)
                    overflow <= 1'b1;
                else
                    count <= count + 1'b1;
            end else if (pop) begin
                if (empty)
                    underflow <= 1'b1;
                else
                    count <= count - 1'b1;
            end
        end
    end
endmodule
