// 8-bit ALU with carry-in and zero / carry / overflow / negative flags.
module alu8_flags (
    input  logic [7:0] a,
    input  logic [7:0] b,
    input  logic [3:0] op,
    input  logic       cin,
    output logic [7:0] y,
    output logic       zero,
    output logic       carry,
    output logic       overflow,
    output logic       negative,
    output logic       illegal
);
    localparam logic [3:0] OP_ADD = 4'h0, OP_ADC = 4'h1, OP_SUB = 4'h2, OP_SBB = 4'h3,
                           OP_AND = 4'h4, OP_OR  = 4'h5, OP_XOR = 4'h6, OP_NOT = 4'h7,
                           OP_SHL = 4'h8, OP_SHR = 4'h9, OP_ASR = 4'hA, OP_ROL = 4'hB,
                           OP_INC = 4'hC, OP_DEC = 4'hD, OP_CMP = 4'hE;

    logic [8:0] sum;
    logic       write_y;

    always_comb begin
        sum      = 9'd0;
        y        = 8'h00;
        carry    = 1'b0;
        overflow = 1'b0;
        illegal  = 1'b0;
        write_y  = 1'b1;
        unique case (op)
            OP_ADD, OP_ADC: begin
                sum      = {1'b0, a} + {1'b0, b} + {8'd0, (op == OP_ADC) && cin};
                y        = sum[7:0];
                carry    = sum[8];
                overflow = (a[7] == b[7]) && (sum[7] != a[7]);
            end
            OP_SUB, OP_SBB, OP_CMP: begin
                sum      = {1'b0, a} - {1'b0, b} - {8'd0, (op == OP_SBB) && cin};
                y        = sum[7:0];
                carry    = sum[8];  // borrow
                overflow = (a[7] != b[7]) && (sum[7] != a[7]);
                if (op == OP_CMP) write_y = 1'b0;
            end
            OP_AND: y = a & b;
            OP_OR:  y = a | b;
            OP_XOR: y = a ^ b;
            OP_NOT: y = ~a;
            OP_SHL: begin y = {a[6:0], 1'b0}; carry = a[7]; overflow = a[7] ^ a[6]; end
            OP_SHR: begin y = {1'b0, a[7:1]}; carry = a[0]; end
            OP_ASR: begin y = {a[7], a[7:1]}; carry = a[0]; end
            OP_ROL: begin y = {a[6:0], cin};  carry = a[7]; end
            OP_INC: begin
                y = a + 8'd1;
                if (a == 8'hFF) carry = 1'b1;
                else if (a == 8'h7F) overflow = 1'b1;
            end
            OP_DEC: begin
                y = a - 8'd1;
                if (a == 8'h00) carry = 1'b1;
                else if (a == 8'h80) overflow = 1'b1;
            end
            default: begin
                illegal = 1'b1;
                write_y = 1'b0;
            end
        endcase
        zero     = (y == 8'h00) && !illegal;
        negative = y[7] && !illegal;
        if (!write_y) y = a;
    end
endmodule
