// GF(2^8) multiplier with two selectable reduction polynomials and a squaring mode.
module gf256_mul (
    input  logic [7:0] a,
    input  logic [7:0] b,
    input  logic       poly_sel,     // 0: x^8+x^4+x^3+x+1 (0x11B), 1: x^8+x^4+x^3+x^2+1 (0x11D)
    input  logic       square,       // 1: compute a*a, b ignored
    output logic [7:0] p,
    output logic       p_zero,
    output logic       inverse,      // operands are multiplicative inverses (product is 1)
    output logic       shortcut      // result produced without the shift-and-add array
);
    logic [7:0] opb;
    logic [7:0] x;
    logic [7:0] acc;

    assign opb = square ? a : b;

    always_comb begin
        x        = a;
        acc      = 8'h00;
        shortcut = 1'b1;
        if (a == 8'h00 || opb == 8'h00) begin
            p = 8'h00;
        end else if (a == 8'h01) begin
            p = opb;
        end else if (opb == 8'h01) begin
            p = a;
        end else begin
            shortcut = 1'b0;
            for (int i = 0; i < 8; i++) begin
                if (opb[i])
                    acc = acc ^ x;
                x = x[7] ? ({x[6:0], 1'b0} ^ (poly_sel ? 8'h1D : 8'h1B)) : {x[6:0], 1'b0};
            end
            p = acc;
        end
    end

    always_comb begin
        p_zero  = (p == 8'h00);
        inverse = 1'b0;
        if (p == 8'h01 && !shortcut)
            inverse = 1'b1;
        else if (p == 8'h01 && a == 8'h01 && opb == 8'h01)
            inverse = 1'b1;
    end
endmodule
