`timescale 1ns/1ps
module tb_counter_load_wrap;
    localparam int WIDTH = 6;
    logic clk = 0, rst_n = 0, en = 0, up = 1, load = 0, clear_wrap = 0;
    logic [WIDTH-1:0] load_value = '0;
    logic [WIDTH-1:0] count;
    logic wrapped, at_max, at_zero;

    counter_load_wrap #(.WIDTH(WIDTH)) uut (
        .clk(clk), .rst_n(rst_n), .en(en), .up(up), .load(load), .load_value(load_value),
        .clear_wrap(clear_wrap), .count(count), .wrapped(wrapped), .at_max(at_max), .at_zero(at_zero)
    );

    always #5 clk = ~clk;

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        // count up through the maximum
        en = 1; up = 1;
        repeat (70) @(posedge clk);
        clear_wrap = 1; @(posedge clk); clear_wrap = 0;
        // hold
        en = 0; repeat (3) @(posedge clk);
        // load patterns that toggle every load_value bit
        load = 1; load_value = 6'b101010; @(posedge clk);
        load_value = 6'b010101; @(posedge clk);
        load_value = 6'b111111; @(posedge clk);
        load_value = 6'b000001; @(posedge clk);
        load = 0;
        // count down through zero
        en = 1; up = 0;
        repeat (4) @(posedge clk);
        clear_wrap = 1; @(posedge clk); clear_wrap = 0;
        // asynchronous reset in the middle of a cycle
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (3) @(posedge clk);
        $finish;
    end
endmodule
