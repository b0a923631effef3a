`timescale 1ns/1ps
module tb_sync_pulse_detect;
    localparam int WIDTH = 3;
    logic clk = 0, rst_n = 0, clear = 0;
    logic [WIDTH-1:0] async_in = '0;
    logic [WIDTH-1:0] level, rise, fall, too_fast, long_high;
    logic any_edge, coincident;

    sync_pulse_detect #(.WIDTH(WIDTH), .STAGES(3), .MIN_GAP(4), .HOLD(10)) uut (
        .clk(clk), .rst_n(rst_n), .clear(clear), .async_in(async_in), .level(level), .rise(rise),
        .fall(fall), .too_fast(too_fast), .long_high(long_high), .any_edge(any_edge), .coincident(coincident)
    );

    always #5 clk = ~clk;

    initial begin
        repeat (2) @(posedge clk);
        #3 rst_n = 1;
        // slow edges on each bit, long enough high time for long_high
        for (int i = 0; i < WIDTH; i++) begin
            #3 async_in[i] = 1'b1; repeat (16) @(posedge clk);
            #2 async_in[i] = 1'b0; repeat (8) @(posedge clk);
        end
        // fast pulses on each bit: rising edges two cycles apart
        for (int i = 0; i < WIDTH; i++) begin
            repeat (3) begin
                #4 async_in[i] = 1'b1; @(posedge clk);
                #4 async_in[i] = 1'b0; @(posedge clk);
            end
            repeat (6) @(posedge clk);
        end
        clear = 1; @(posedge clk); clear = 0;
        // all bits together
        #1 async_in = '1; repeat (12) @(posedge clk);
        #1 async_in = '0; repeat (6) @(posedge clk);
        // random asynchronous activity
        for (int k = 0; k < 150; k++) begin
            #($urandom_range(1, 25)) async_in = $urandom;
            clear = $urandom_range(0, 15) == 0;
        end
        clear = 0; async_in = '0;
        repeat (8) @(posedge clk);
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (2) @(posedge clk);
        $finish;
    end
endmodule
