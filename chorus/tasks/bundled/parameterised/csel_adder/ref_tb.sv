`timescale 1ns/1ps
module tb_csel_adder;
    localparam int WIDTH = 16, BLOCK = 4;
    logic [WIDTH-1:0] a = '0, b = '0;
    logic cin = 0;
    logic [1:0] op = 2'b00;
    logic [WIDTH-1:0] sum;
    logic cout, overflow, zero, eq, lt_unsigned, full_propagate;
    logic [WIDTH/BLOCK-1:0] group_carry;

    csel_adder #(.WIDTH(WIDTH), .BLOCK(BLOCK)) uut (
        .a(a), .b(b), .cin(cin), .op(op), .sum(sum), .cout(cout), .overflow(overflow), .zero(zero),
        .eq(eq), .lt_unsigned(lt_unsigned), .full_propagate(full_propagate), .group_carry(group_carry)
    );

    task automatic apply(input logic [1:0] o, input logic [WIDTH-1:0] x, input logic [WIDTH-1:0] y, input logic ci);
        op = o; a = x; b = y; cin = ci; #10;
    endtask

    initial begin
        #10;
        // add: full carry propagation, no carry, overflow both signs
        apply(2'b00, 16'hFFFF, 16'h0000, 1'b1);
        apply(2'b00, 16'h0000, 16'h0000, 1'b0);
        apply(2'b00, 16'hFFFF, 16'hFFFF, 1'b1);
        apply(2'b00, 16'h7FFF, 16'h0001, 1'b0);
        apply(2'b00, 16'h8000, 16'h8000, 1'b0);
        apply(2'b00, 16'h5555, 16'hAAAA, 1'b0);
        apply(2'b00, 16'hAAAA, 16'h5555, 1'b1);
        apply(2'b00, 16'h0F0F, 16'h0F0F, 1'b0);
        apply(2'b00, 16'hF0F0, 16'h0F0F, 1'b1);
        // subtract: equal, borrow, signed overflow
        apply(2'b01, 16'h1234, 16'h1234, 1'b0);
        apply(2'b01, 16'h0000, 16'h0001, 1'b0);
        apply(2'b01, 16'h8000, 16'h0001, 1'b0);
        apply(2'b01, 16'h7FFF, 16'hFFFF, 1'b0);
        // increment, including wrap to zero
        apply(2'b10, 16'hFFFF, 16'h1234, 1'b0);
        apply(2'b10, 16'h00FF, 16'h0000, 1'b0);
        apply(2'b10, 16'h7FFF, 16'h0000, 1'b0);
        // compare: equal, less, greater
        apply(2'b11, 16'hBEEF, 16'hBEEF, 1'b0);
        apply(2'b11, 16'h0001, 16'hFFFE, 1'b0);
        apply(2'b11, 16'hFFFE, 16'h0001, 1'b0);
        apply(2'b11, 16'h0000, 16'h0000, 1'b1);
        // random operands in every mode
        for (int k = 0; k < 400; k++)
            apply(2'($urandom), 16'($urandom), 16'($urandom), 1'($urandom));
        $finish;
    end
endmodule
