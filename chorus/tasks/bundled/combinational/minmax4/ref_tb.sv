`timescale 1ns/1ps
module tb_minmax4;
    logic [7:0] a = '0, b = '0, c = '0, d = '0;
    logic signed_mode = 0;
    logic [7:0] min_val, max_val, range;
    logic [1:0] min_idx, max_idx;
    logic all_equal, min_tie, full_scale;

    minmax4 uut (
        .a(a), .b(b), .c(c), .d(d), .signed_mode(signed_mode),
        .min_val(min_val), .max_val(max_val), .min_idx(min_idx), .max_idx(max_idx),
        .range(range), .all_equal(all_equal), .min_tie(min_tie), .full_scale(full_scale)
    );

    task automatic put(input logic [7:0] w, x, y, z);
        a = w; b = x; c = y; d = z; #5;
    endtask

    initial begin
        void'($urandom(53));
        #5;
        for (int s = 0; s < 2; s++) begin
            signed_mode = s[0];
            // every permutation position for a small/large/negative value
            put(8'h10, 8'h20, 8'h30, 8'h40);
            put(8'h40, 8'h30, 8'h20, 8'h10);
            put(8'h20, 8'h10, 8'h40, 8'h30);
            put(8'h30, 8'h40, 8'h10, 8'h20);
            put(8'h90, 8'h05, 8'h7E, 8'h01);
            put(8'h05, 8'h90, 8'h01, 8'h7E);
            put(8'h7E, 8'h01, 8'h90, 8'h05);
            put(8'h01, 8'h7E, 8'h05, 8'h90);
            // ties
            put(8'h11, 8'h11, 8'h50, 8'h60);
            put(8'h60, 8'h50, 8'h11, 8'h11);
            put(8'h11, 8'h50, 8'h11, 8'h50);
            put(8'h50, 8'h11, 8'h50, 8'h11);
            put(8'hA0, 8'hA0, 8'hA0, 8'hA0);
            put(8'h00, 8'h00, 8'h00, 8'h00);
            put(8'hFF, 8'hFF, 8'hFF, 8'hFF);
            // full scale in each mode
            put(8'h00, 8'h80, 8'h7F, 8'hFF);
            put(8'hFF, 8'h7F, 8'h80, 8'h00);
            put(8'h80, 8'h33, 8'h7F, 8'h44);
            put(8'h00, 8'h33, 8'hFF, 8'h44);
        end
        repeat (200) begin
            put(8'($urandom), 8'($urandom), 8'($urandom), 8'($urandom));
            signed_mode = 1'($urandom);
        end
        $finish;
    end
endmodule
