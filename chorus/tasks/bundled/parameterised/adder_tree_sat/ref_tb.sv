`timescale 1ns/1ps
module tb_adder_tree_sat;
    localparam int N = 8, W = 6;
    logic clk = 0, rst_n = 0, sat_en = 0;
    logic [N*W-1:0] operands = '0;
    logic [N-1:0] lane_en = '0;
    logic signed [W+$clog2(N)-1:0] sum;
    logic signed [W-1:0] result;
    logic sat_hi, sat_lo, extreme, no_lanes;

    adder_tree_sat #(.N(N), .W(W)) dut (
        .clk(clk), .rst_n(rst_n), .operands(operands), .lane_en(lane_en), .sat_en(sat_en),
        .sum(sum), .result(result), .sat_hi(sat_hi), .sat_lo(sat_lo), .extreme(extreme), .no_lanes(no_lanes)
    );

    always #5 clk = ~clk;

    task automatic all_lanes(input logic [W-1:0] v);
        for (int i = 0; i < N; i++) operands[i*W +: W] = v;
    endtask

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        lane_en = '1;
        // extremes, with and without saturation
        for (int s = 0; s < 2; s++) begin
            sat_en = s[0];
            all_lanes(6'h1F); @(posedge clk);   // largest total
            all_lanes(6'h20); @(posedge clk);   // smallest total
            all_lanes(6'h00); @(posedge clk);
            all_lanes(6'h3F); @(posedge clk);   // -8
            all_lanes(6'h01); @(posedge clk);
        end
        // one lane at a time, alternating signs
        sat_en = 1;
        for (int i = 0; i < N; i++) begin
            lane_en = N'(1) << i;
            all_lanes(6'h15); @(posedge clk);
            all_lanes(6'h2A); @(posedge clk);
        end
        lane_en = '0; all_lanes(6'h1F); @(posedge clk);
        // near the saturation boundaries
        lane_en = 8'b0000_0011;
        all_lanes(6'h10); @(posedge clk);   // 32 -> sat_hi
        all_lanes(6'h30); @(posedge clk);   // -32 -> in range
        lane_en = 8'b0000_0111;
        all_lanes(6'h30); @(posedge clk);   // -48 -> sat_lo
        // random mix
        for (int k = 0; k < 300; k++) begin
            operands = {$urandom, $urandom};
            lane_en  = $urandom;
            sat_en   = $urandom;
            @(posedge clk);
        end
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (2) @(posedge clk);
        $finish;
    end
endmodule
