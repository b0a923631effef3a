// BW-bit ripple-carry block: a generate chain of full_adder instances.
// CHAIN numbers the block within the adder; its cells are numbered from
// CHAIN*BW upward.
module rca_block #(
    parameter int BW    = 4,
    parameter int CHAIN = 0
) (
    input  logic [BW-1:0] a,
    input  logic [BW-1:0] b,
    input  logic          cin,
    output logic [BW-1:0] s,
    output logic          cout
);
    logic [BW:0] c;
    assign c[0] = cin;
    for (genvar i = 0; i < BW; i++) begin : g_bit
        full_adder #(.POS(CHAIN * BW + i)) u_fa (.a(a[i]), .b(b[i]), .cin(c[i]), .s(s[i]), .cout(c[i+1]));
    end
    assign cout = c[BW];
endmodule
