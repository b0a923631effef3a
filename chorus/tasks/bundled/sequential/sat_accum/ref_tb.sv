`timescale 1ns/1ps
module tb_sat_accum;
    logic clk = 0, rst_n = 0, clear = 0, valid = 0, sub = 0, clear_ovf = 0;
    logic signed [7:0] data_in = 0;
    logic signed [11:0] acc;
    logic at_max, at_min, ovf_sticky;
    logic [1:0] last_sat;
    logic [5:0] samples;

    sat_accum dut (
        .clk(clk), .rst_n(rst_n), .clear(clear), .valid(valid), .sub(sub), .data_in(data_in),
        .clear_ovf(clear_ovf), .acc(acc), .at_max(at_max), .at_min(at_min), .ovf_sticky(ovf_sticky),
        .last_sat(last_sat), .samples(samples)
    );

    always #5 clk = ~clk;

    task automatic feed(input logic s, input logic signed [7:0] d, input int n);
        @(negedge clk); valid = 1; sub = s; data_in = d;
        repeat (n) @(negedge clk);
        valid = 0;
    endtask

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        // add up to the positive limit and beyond
        feed(1'b0, 8'sd127, 20);
        // come back by subtracting
        feed(1'b1, 8'sd100, 3);
        // subtract -128 (i.e. add 128) into the limit
        feed(1'b1, -8'sd128, 4);
        @(negedge clk); clear_ovf = 1; @(negedge clk); clear_ovf = 0;
        // down to the negative limit by adding negatives, then by subtracting
        feed(1'b0, -8'sd128, 40);
        feed(1'b0, 8'sd1, 2);
        feed(1'b1, 8'sd127, 3);
        // clamp in the same cycle as clear_ovf
        @(negedge clk); valid = 1; sub = 0; data_in = -8'sd5; clear_ovf = 1;
        @(negedge clk); valid = 0; clear_ovf = 0;
        // clear while valid
        @(negedge clk); clear = 1; valid = 1; data_in = 8'sd55; @(negedge clk); clear = 0; valid = 0;
        // random samples, long run without clear
        repeat (120) begin
            @(negedge clk);
            valid = $urandom_range(0, 3) != 0;
            sub = $urandom_range(0, 1);
            data_in = $urandom;
            clear_ovf = $urandom_range(0, 31) == 0;
        end
        valid = 0; clear_ovf = 0;
        feed(1'b0, 8'sd85, 2);
        feed(1'b0, -8'sd86, 4);
        @(negedge clk); clear = 1; @(negedge clk); clear = 0;
        // asynchronous reset mid-cycle
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (3) @(posedge clk);
        $finish;
    end
endmodule
