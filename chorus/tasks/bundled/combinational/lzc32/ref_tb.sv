`timescale 1ns/1ps
module tb_lzc32;
    logic [31:0] din = '0;
    logic count_ones = 0;
    logic [5:0] count;
    logic all_same;
    logic [31:0] norm;

    lzc32 dut (.din(din), .count_ones(count_ones), .count(count), .all_same(all_same), .norm(norm));

    initial begin
        logic [31:0] r;
        void'($urandom(17));
        #5;
        for (int m = 0; m < 2; m++) begin
            count_ones = m[0];
            // every count 0..32, with a single differing bit and with random tails
            for (int n = 0; n <= 32; n++) begin
                din = (n == 32) ? 32'd0 : (32'h8000_0000 >> n);
                if (count_ones) din = ~din;
                #5;
                r = $urandom;
                din = (n == 32) ? 32'd0 : ((32'h8000_0000 >> n) | (r >> (n + 1)));
                if (n == 31) din = 32'h1;
                if (count_ones) din = ~din;
                #5;
            end
        end
        // random words
        repeat (100) begin
            din = $urandom; count_ones = 1'($urandom); #5;
        end
        count_ones = 0; din = 32'hFFFF_FFFF; #5;
        din = 32'h0; #5;
        $finish;
    end
endmodule
