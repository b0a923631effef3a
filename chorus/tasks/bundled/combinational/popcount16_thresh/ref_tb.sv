`timescale 1ns/1ps
module tb_popcount16_thresh;
    logic [15:0] din = '0;
    logic [4:0] thresh = '0;
    logic [1:0] cmp_mode = '0;
    logic [4:0] count;
    logic hit, extreme, thresh_bad;
    logic [2:0] level;

    popcount16_thresh uut (
        .din(din), .thresh(thresh), .cmp_mode(cmp_mode),
        .count(count), .hit(hit), .level(level), .extreme(extreme), .thresh_bad(thresh_bad)
    );

    // a word with exactly n ones, spread by a random rotation
    function automatic logic [15:0] ones(input int n, input logic [3:0] rot);
        logic [31:0] w;
        w = (n == 16) ? 32'hFFFF : ((32'h1 << n) - 1);
        w = {w[15:0], w[15:0]} << rot;
        return w[31:16];
    endfunction

    initial begin
        void'($urandom(41));
        #5;
        for (int m = 0; m < 4; m++) begin
            cmp_mode = m[1:0];
            for (int n = 0; n <= 16; n++) begin
                thresh = 5'd8;
                din = ones(n, 4'($urandom)); #2;
                thresh = n[4:0]; #2;
                thresh = 5'(n + 1); #2;
                thresh = (n > 0) ? 5'(n - 1) : 5'd31; #2;
            end
        end
        // pairwise patterns that fill each adder-tree node
        foreach (din[i]) begin
            din = 16'h0003 << (i & ~1); #2;
            din = 16'h000F << (i & ~3); #2;
            din = 16'h00FF << (i & ~7); #2;
        end
        din = 16'hFFFF; thresh = 5'd31; #2;
        din = 16'h0000; thresh = 5'd0;  #2;
        repeat (100) begin
            din = 16'($urandom); thresh = 5'($urandom); cmp_mode = 2'($urandom); #2;
        end
        $finish;
    end
endmodule
