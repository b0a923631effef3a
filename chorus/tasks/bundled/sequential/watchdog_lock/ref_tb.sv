`timescale 1ns/1ps
module tb_watchdog_lock;
    logic clk = 0, rst_n = 0, cfg_we = 0, cfg_enable = 0, lock = 0, kick = 0;
    logic [7:0] cfg_timeout = 0, cfg_window = 0, kick_key = 0;
    logic enabled, locked, cfg_err, warn, wdt_reset;
    logic [7:0] count;
    logic [1:0] cause, bite_cnt;

    watchdog_lock dut (
        .clk(clk), .rst_n(rst_n), .cfg_we(cfg_we), .cfg_enable(cfg_enable), .cfg_timeout(cfg_timeout),
        .cfg_window(cfg_window), .lock(lock), .kick(kick), .kick_key(kick_key), .enabled(enabled),
        .locked(locked), .cfg_err(cfg_err), .count(count), .warn(warn), .wdt_reset(wdt_reset),
        .cause(cause), .bite_cnt(bite_cnt)
    );

    always #5 clk = ~clk;

    task automatic configure(input logic en, input logic [7:0] to, input logic [7:0] win);
        @(negedge clk); cfg_we = 1; cfg_enable = en; cfg_timeout = to; cfg_window = win;
        @(negedge clk); cfg_we = 0;
    endtask

    task automatic do_kick(input logic [7:0] key);
        @(negedge clk); kick = 1; kick_key = key; @(negedge clk); kick = 0;
    endtask

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        // lock while disabled has no effect; kick while disabled ignored
        @(negedge clk); lock = 1; @(negedge clk); lock = 0;
        do_kick(8'h5A);
        // long timeout with the reset value 200
        configure(1'b1, 8'd200, 8'd0);
        repeat (820) @(posedge clk);
        // windowed operation: valid kicks inside the window
        configure(1'b1, 8'd20, 8'd4);
        repeat (3) begin
            repeat (30) @(posedge clk);
            do_kick(8'h5A);
        end
        // early kick
        repeat (4) @(posedge clk);
        do_kick(8'h5A);
        // kick during wdt_reset is ignored
        do_kick(8'hA5);
        repeat (10) @(posedge clk);
        // wrong key
        do_kick(8'hA5);
        repeat (10) @(posedge clk);
        // timeout lowered below the current count
        configure(1'b1, 8'd40, 8'd0);
        repeat (70) @(posedge clk);
        configure(1'b1, 8'd3, 8'd0);
        repeat (400) @(posedge clk);
        configure(1'b1, 8'hFF, 8'hFF);
        configure(1'b0, 8'h55, 8'hAA);
        configure(1'b1, 8'h0A, 8'h01);
        // lock, then try to reconfigure
        @(negedge clk); lock = 1; @(negedge clk); lock = 0;
        configure(1'b0, 8'd5, 8'd0);
        repeat (30) @(posedge clk);
        do_kick(8'h5A);
        // random kicks
        repeat (150) begin
            @(negedge clk);
            kick = $urandom_range(0, 9) == 0;
            kick_key = ($urandom_range(0, 3) == 0) ? 8'($urandom) : 8'h5A;
        end
        kick = 0;
        // asynchronous reset mid-cycle
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (3) @(posedge clk);
        $finish;
    end
endmodule
