`timescale 1ns/1ps
module tb_prog_timer;
    logic clk = 0, rst_n = 0, cfg_we = 0, cfg_periodic = 0, start = 0, stop = 0, irq_clear = 0;
    logic [7:0] cfg_load = 0;
    logic [3:0] cfg_prescale = 0;
    logic [7:0] count;
    logic running, tick, expired, irq, irq_overrun, cfg_err;

    prog_timer uut (
        .clk(clk), .rst_n(rst_n), .cfg_we(cfg_we), .cfg_load(cfg_load), .cfg_prescale(cfg_prescale),
        .cfg_periodic(cfg_periodic), .start(start), .stop(stop), .irq_clear(irq_clear),
        .count(count), .running(running), .tick(tick), .expired(expired), .irq(irq),
        .irq_overrun(irq_overrun), .cfg_err(cfg_err)
    );

    always #5 clk = ~clk;

    task automatic configure(input logic [7:0] ld, input logic [3:0] psc, input logic per);
        @(negedge clk); cfg_we = 1; cfg_load = ld; cfg_prescale = psc; cfg_periodic = per;
        @(negedge clk); cfg_we = 0;
    endtask

    task automatic pulse_start();
        @(negedge clk); start = 1; @(negedge clk); start = 0;
    endtask

    task automatic pulse_clear();
        @(negedge clk); irq_clear = 1; @(negedge clk); irq_clear = 0;
    endtask

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        // one-shot, load 0, prescale 0: expires right away
        configure(8'd0, 4'd0, 1'b0);
        pulse_start();
        repeat (3) @(posedge clk);
        pulse_clear();
        // one-shot with full-range load value
        configure(8'hFF, 4'd0, 1'b0);
        pulse_start();
        // config write while running -> cfg_err
        configure(8'h55, 4'hA, 1'b1);
        wait (!running);
        repeat (2) @(posedge clk);
        // periodic, prescale max, expire several times without clearing -> overrun
        configure(8'd2, 4'hF, 1'b1);
        pulse_start();
        repeat (150) @(posedge clk);
        // clear in the same cycle as an expiry
        wait (tick && count == 0); @(negedge clk);
        wait (tick && count == 0);
        irq_clear = 1; @(negedge clk); irq_clear = 0;
        pulse_clear();
        // start while running is ignored; stop mid-count; stop and start together
        pulse_start();
        repeat (20) @(posedge clk);
        @(negedge clk); stop = 1; start = 1; @(negedge clk); stop = 0; start = 0;
        configure(8'hAA, 4'h5, 1'b0);
        pulse_start();
        repeat (30) @(posedge clk);
        @(negedge clk); stop = 1; @(negedge clk); stop = 0;
        // random pokes
        repeat (150) begin
            @(negedge clk);
            cfg_we = $urandom_range(0, 15) == 0;
            cfg_load = $urandom_range(0, 7);
            cfg_prescale = $urandom_range(0, 3);
            cfg_periodic = $urandom_range(0, 1);
            start = $urandom_range(0, 7) == 0;
            stop = $urandom_range(0, 31) == 0;
            irq_clear = $urandom_range(0, 15) == 0;
        end
        cfg_we = 0; start = 0; stop = 0; irq_clear = 0;
        // asynchronous reset mid-cycle
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (3) @(posedge clk);
        $finish;
    end
endmodule
