// Carry-select adder/ALU: WIDTH bits split into BLOCK-bit groups. Group 0 is
// a plain ripple block; every other group computes its sum for carry-in 0
// and carry-in 1 in parallel and the incoming carry selects one of them.
// op: 00 add (a+b+cin), 01 subtract (a-b), 10 increment (a+1), 11 compare.
module csel_adder #(
    parameter int WIDTH = 16,
    parameter int BLOCK = 4
) (
    input  logic [WIDTH-1:0]       a,
    input  logic [WIDTH-1:0]       b,
    input  logic                   cin,
    input  logic [1:0]             op,
    output logic [WIDTH-1:0]       sum,
    output logic                   cout,
    output logic                   overflow,
    output logic                   zero,
    output logic                   eq,
    output logic                   lt_unsigned,
    output logic                   full_propagate,
    output logic [WIDTH/BLOCK-1:0] group_carry
);
    localparam int NB = WIDTH / BLOCK;

    logic [WIDTH-1:0] bx;
    logic             c0;
    logic [NB:0]      c;

    // operand conditioning per operation
    always_comb begin
        case (op)
            2'b00:   begin bx = b;        c0 = cin;  end
            2'b01,
            2'b11:   begin bx = ~b;       c0 = 1'b1; end
            default: begin bx = '0;       c0 = 1'b1; end
        endcase
    end

    assign c[0] = c0;

    rca_block #(.BW(BLOCK), .CHAIN(0)) u_blk0 (
        .a(a[BLOCK-1:0]), .b(bx[BLOCK-1:0]), .cin(c[0]), .s(sum[BLOCK-1:0]), .cout(c[1])
    );

    for (genvar g = 1; g < NB; g++) begin : g_sel
        logic [BLOCK-1:0] s0, s1;
        logic             co0, co1;
        rca_block #(.BW(BLOCK), .CHAIN(2 * g - 1)) u_c0 (
            .a(a[g*BLOCK +: BLOCK]), .b(bx[g*BLOCK +: BLOCK]), .cin(1'b0), .s(s0), .cout(co0)
        );
        rca_block #(.BW(BLOCK), .CHAIN(2 * g)) u_c1 (
            .a(a[g*BLOCK +: BLOCK]), .b(bx[g*BLOCK +: BLOCK]), .cin(1'b1), .s(s1), .cout(co1)
        );
        assign sum[g*BLOCK +: BLOCK] = c[g] ? s1 : s0;
        assign c[g+1]                = c[g] ? co1 : co0;
    end

    assign group_carry = c[NB:1];
    assign cout        = c[NB];
    // signed overflow: operands of equal sign give a result of the other sign
    assign overflow    = (op != 2'b11) && (a[WIDTH-1] == bx[WIDTH-1]) && (sum[WIDTH-1] != a[WIDTH-1]);
    assign zero        = (sum == '0);
    assign eq          = (op == 2'b11) && zero;
    assign lt_unsigned = (op == 2'b11) && !cout;
    // every bit position propagates: the carry-in ripples through all groups
    assign full_propagate = &(a ^ bx);
endmodule
