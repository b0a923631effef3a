`timescale 1ns/1ps
module tb_alu8_flags;
    logic [7:0] a = '0, b = '0;
    logic [3:0] op = '0;
    logic cin = 0;
    logic [7:0] y;
    logic zero, carry, overflow, negative, illegal;

    alu8_flags dut (
        .a(a), .b(b), .op(op), .cin(cin),
        .y(y), .zero(zero), .carry(carry), .overflow(overflow), .negative(negative), .illegal(illegal)
    );

    // operand pairs that hit the corner cases of add and subtract
    logic [7:0] pa [12] = '{8'h00, 8'hFF, 8'h7F, 8'h80, 8'h01, 8'h55, 8'hAA, 8'h80, 8'h7F, 8'h40, 8'hC0, 8'h12};
    logic [7:0] pb [12] = '{8'h00, 8'h01, 8'h01, 8'h80, 8'hFF, 8'hAA, 8'h55, 8'h01, 8'hFF, 8'h40, 8'hC0, 8'h34};

    task automatic apply(input logic [3:0] o, input logic [7:0] x, input logic [7:0] z, input logic c);
        op = o; a = x; b = z; cin = c; #5;
    endtask

    initial begin
        void'($urandom(11));
        #5;
        for (int o = 0; o < 16; o++) begin
            for (int k = 0; k < 12; k++) begin
                apply(o[3:0], pa[k], pb[k], 1'b0);
                apply(o[3:0], pa[k], pb[k], 1'b1);
            end
        end
        // INC / DEC wrap and overflow corners
        foreach (pa[k]) begin
            apply(4'hC, pa[k], 8'h00, 1'b0);
            apply(4'hD, pa[k], 8'h00, 1'b0);
        end
        apply(4'hC, 8'hFE, 8'h00, 1'b0);
        apply(4'hD, 8'h81, 8'h00, 1'b0);
        // shifts with patterns that disagree in the top two bits
        apply(4'h8, 8'h40, 8'h00, 1'b0);
        apply(4'h8, 8'hBF, 8'h00, 1'b0);
        // random sweep
        repeat (300) apply(4'($urandom), 8'($urandom), 8'($urandom), 1'($urandom));
        apply(4'h0, 8'h00, 8'h00, 1'b0);
        $finish;
    end
endmodule
