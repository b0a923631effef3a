`timescale 1ns/1ps
module tb_debounce_edge;
    logic clk = 0, rst_n = 0, noisy_in = 0, thresh_we = 0, glitch_clear = 0;
    logic [7:0] thresh_in = 0;
    logic clean, rise, fall, glitch_sat;
    logic [7:0] stable_cnt;
    logic [3:0] glitch_cnt;

    debounce_edge uut (
        .clk(clk), .rst_n(rst_n), .noisy_in(noisy_in), .thresh_we(thresh_we), .thresh_in(thresh_in),
        .glitch_clear(glitch_clear), .clean(clean), .rise(rise), .fall(fall),
        .stable_cnt(stable_cnt), .glitch_cnt(glitch_cnt), .glitch_sat(glitch_sat)
    );

    always #5 clk = ~clk;

    task automatic set_thresh(input logic [7:0] t);
        @(negedge clk); thresh_we = 1; thresh_in = t; @(negedge clk); thresh_we = 0;
    endtask

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        // default threshold: one accepted rise
        noisy_in = 1;
        repeat (210) @(posedge clk);
        // short glitches with the default threshold
        repeat (17) begin
            noisy_in = 0; repeat (4) @(posedge clk);
            noisy_in = 1; repeat (3) @(posedge clk);
        end
        @(negedge clk); glitch_clear = 1; @(negedge clk); glitch_clear = 0;
        // maximum threshold, accepted fall
        set_thresh(8'hFF);
        noisy_in = 0;
        repeat (262) @(posedge clk);
        // small thresholds and bit patterns of the threshold register
        set_thresh(8'h55);
        set_thresh(8'h2A);
        set_thresh(8'd3);
        repeat (20) begin
            noisy_in = ~noisy_in;
            repeat ($urandom_range(2, 9)) @(posedge clk);
        end
        set_thresh(8'd0);
        repeat (10) begin
            noisy_in = ~noisy_in;
            repeat ($urandom_range(1, 4)) @(posedge clk);
        end
        @(negedge clk); glitch_clear = 1; noisy_in = ~noisy_in; @(negedge clk); glitch_clear = 0;
        repeat (5) @(posedge clk);
        // asynchronous reset mid-cycle
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (3) @(posedge clk);
        $finish;
    end
endmodule
