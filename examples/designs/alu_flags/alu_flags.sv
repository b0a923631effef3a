// Small 8-bit ALU with registered result and flags.
// op: 0 add, 1 sub, 2 and, 3 or, 4 xor, 5 shl, 6 shr, 7 cmp.
// Shifts move a by the full value of b; b > 8 gives y = 0, carry = 0, and
// b = 0 gives y = a with carry unchanged.
// Results and flags update only on cycles with valid_in high.
module alu_flags (
    input  logic       clk,
    input  logic       rst_n,
    input  logic [2:0] op,
    input  logic [7:0] a,
    input  logic [7:0] b,
    input  logic       valid_in,
    output logic [7:0] y,
    output logic       zero,
    output logic       negative,
    output logic       carry,
    output logic       overflow,
    output logic       valid_out
);
    localparam logic [2:0] OP_ADD = 3'd0;
    localparam logic [2:0] OP_SUB = 3'd1;
    localparam logic [2:0] OP_AND = 3'd2;
    localparam logic [2:0] OP_OR  = 3'd3;
    localparam logic [2:0] OP_XOR = 3'd4;
    localparam logic [2:0] OP_SHL = 3'd5;
    localparam logic [2:0] OP_CMP = 3'd7;

    localparam logic [7:0] SH_MAX = 8'd8;  // larger shift amounts clear y and carry

    logic [8:0] sum, diff, shl9, shr9;
    logic [7:0] res;
    logic       res_c, res_v, write_y;

    assign sum  = {1'b0, a} + {1'b0, b};
    assign diff = {1'b0, a} - {1'b0, b};      // diff[8] = borrow (a < b)
    assign shl9 = {1'b0, a} << b[3:0];         // shl9[8] = last bit shifted out
    assign shr9 = {a, 1'b0} >> b[3:0];         // shr9[0] = last bit shifted out

    always_comb begin
        res     = 8'h00;
        res_c   = 1'b0;
        res_v   = 1'b0;
        write_y = 1'b1;
        case (op)
            OP_ADD: begin
                res   = sum[7:0];
                res_c = sum[8];
                res_v = (a[7] == b[7]) && (sum[7] != a[7]);
            end
            OP_SUB, OP_CMP: begin
                res     = diff[7:0];
                res_c   = diff[8];
                res_v   = (a[7] != b[7]) && (diff[7] != a[7]);
                write_y = (op == OP_SUB);      // cmp only updates the flags
            end
            OP_AND: res = a & b;
            OP_OR:  res = a | b;
            OP_XOR: res = a ^ b;
            OP_SHL: begin
                if (b == 8'd0) begin
                    res   = a;
                    res_c = carry;          // shift by 0 leaves carry as it was
                end else if (b <= SH_MAX) begin
                    res   = shl9[7:0];
                    res_c = shl9[8];
                end
            end
            default: begin // 3'd6: shr
                if (b == 8'd0) begin
                    res   = a;
                    res_c = carry;          // shift by 0 leaves carry as it was
                end else if (b <= SH_MAX) begin
                    res   = shr9[8:1];
                    res_c = shr9[0];
                end
            end
        endcase
    end

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            y         <= 8'h00;
            zero      <= 1'b0;
            negative  <= 1'b0;
            carry     <= 1'b0;
            overflow  <= 1'b0;
            valid_out <= 1'b0;
        end else begin
            valid_out <= valid_in;
            if (valid_in) begin
                if (write_y) y <= res;
                zero     <= (res == 8'h00);
                negative <= res[7];
                carry    <= res_c;
                overflow <= res_v;
            end
        end
    end
endmodule
