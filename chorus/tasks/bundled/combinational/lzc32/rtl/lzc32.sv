// 32-bit leading-zero / leading-one counter with normaliser output.
module lzc32 (
    input  logic [31:0] din,
    input  logic        count_ones,   // 1: count leading ones instead of zeros
    output logic [5:0]  count,        // 0..32
    output logic        all_same,     // din is all zeros (or all ones when count_ones)
    output logic [31:0] norm          // din shifted left by count (0 when all_same)
);
    logic [31:0] v;
    logic [7:0]  byte_sel;
    logic [1:0]  byte_idx;
    logic [2:0]  bit_idx;

    assign v = count_ones ? ~din : din;

    // Find the first non-zero byte from the top.
    always_comb begin
        all_same = 1'b0;
        byte_idx = 2'd0;
        byte_sel = v[31:24];
        if (v[31:24] != 8'h00) begin
            byte_idx = 2'd0;
            byte_sel = v[31:24];
        end else if (v[23:16] != 8'h00) begin
            byte_idx = 2'd1;
            byte_sel = v[23:16];
        end else if (v[15:8] != 8'h00) begin
            byte_idx = 2'd2;
            byte_sel = v[15:8];
        end else if (v[7:0] != 8'h00) begin
            byte_idx = 2'd3;
            byte_sel = v[7:0];
        end else begin
            all_same = 1'b1;
        end
    end

    // Leading zeros inside the selected byte.
    always_comb begin
        casez (byte_sel)
            8'b1???????: bit_idx = 3'd0;
            8'b01??????: bit_idx = 3'd1;
            8'b001?????: bit_idx = 3'd2;
            8'b0001????: bit_idx = 3'd3;
            8'b00001???: bit_idx = 3'd4;
            8'b000001??: bit_idx = 3'd5;
            8'b0000001?: bit_idx = 3'd6;
            default:     bit_idx = 3'd7;
        endcase
    end

    assign count = all_same ? 6'd32 : {1'b0, byte_idx, bit_idx};
    assign norm  = all_same ? 32'd0 : (din << count[4:0]);
endmodule
