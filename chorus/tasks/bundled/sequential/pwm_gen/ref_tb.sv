`timescale 1ns/1ps
module tb_pwm_gen;
    logic clk = 0, rst_n = 0, wr_en = 0;
    logic [1:0] addr = 0;
    logic [7:0] wdata = 0;
    logic pwm_out, period_end, enabled, done;
    logic [7:0] cnt, periods_done;

    pwm_gen dut (
        .clk(clk), .rst_n(rst_n), .wr_en(wr_en), .addr(addr), .wdata(wdata), .pwm_out(pwm_out),
        .period_end(period_end), .cnt(cnt), .periods_done(periods_done), .enabled(enabled), .done(done)
    );

    always #5 clk = ~clk;

    task automatic wr(input logic [1:0] a, input logic [7:0] d);
        @(negedge clk); wr_en = 1; addr = a; wdata = d; @(negedge clk); wr_en = 0;
    endtask

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        // reset settings: period 255, duty 128
        wr(2, 8'h01);
        repeat (260) @(posedge clk);
        // change period/duty while running (applied at period end)
        wr(0, 8'd9); wr(1, 8'd3);
        repeat (280) @(posedge clk);
        wr(1, 8'd0);  repeat (25) @(posedge clk);   // always low
        wr(1, 8'd20); repeat (25) @(posedge clk);   // always high
        wr(2, 8'h03); repeat (25) @(posedge clk);   // inverted
        wr(1, 8'd4);  repeat (25) @(posedge clk);
        // continuous, period 1, let periods_done wrap
        wr(0, 8'd1); wr(1, 8'd1); wr(2, 8'h01);
        repeat (530) @(posedge clk);
        // disable while inverted, write while disabled
        wr(2, 8'h02);
        wr(0, 8'hAA); wr(1, 8'h55); wr(1, 8'hAA); wr(0, 8'h04); wr(1, 8'h02);
        // burst of 3 periods
        wr(3, 8'd3); wr(2, 8'h01);
        repeat (25) @(posedge clk);
        // re-enable clears done; burst ending while CTRL is written
        wr(3, 8'd1); wr(0, 8'd2);
        @(negedge clk); wr_en = 1; addr = 2; wdata = 8'h01;
        @(negedge clk); wr_en = 0;
        wait (period_end); @(negedge clk);
        repeat (5) @(posedge clk);
        @(negedge clk); wr_en = 1; addr = 2; wdata = 8'h01; @(negedge clk);
        wdata = 8'h00; @(negedge clk);
        wdata = 8'h01; @(negedge clk); wr_en = 0;
        wait (cnt == 8'd2);
        @(negedge clk); wr_en = 1; addr = 2; wdata = 8'h01; @(negedge clk); wr_en = 0;
        // bursts of the full length registers
        wr(3, 8'hFF); wr(3, 8'h00);
        repeat (10) @(posedge clk);
        // asynchronous reset mid-cycle
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (3) @(posedge clk);
        $finish;
    end
endmodule
