`timescale 1ns/1ps
module tb_lfsr_seed_lock;
    logic clk = 0, rst_n = 0, en = 0, seed_we = 0, auto_recover = 0;
    logic [7:0] seed = 0;
    logic [7:0] state, step_cnt;
    logic bit_out, locked, lock_seen, period_done;
    logic [1:0] recover_cnt;

    lfsr_seed_lock uut (
        .clk(clk), .rst_n(rst_n), .en(en), .seed_we(seed_we), .seed(seed), .auto_recover(auto_recover),
        .state(state), .bit_out(bit_out), .locked(locked), .lock_seen(lock_seen),
        .period_done(period_done), .step_cnt(step_cnt), .recover_cnt(recover_cnt)
    );

    always #5 clk = ~clk;

    task automatic load_seed(input logic [7:0] s);
        @(negedge clk); seed_we = 1; seed = s; @(negedge clk); seed_we = 0;
    endtask

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        // full period from the reset seed, plus a few more steps
        en = 1;
        repeat (262) @(posedge clk);
        // pause
        @(negedge clk); en = 0; repeat (3) @(posedge clk);
        // other seeds
        load_seed(8'hAA); en = 1; repeat (10) @(posedge clk);
        load_seed(8'h55); repeat (10) @(posedge clk);
        // lock-up without recovery, then with recovery (four times)
        load_seed(8'h00); repeat (4) @(posedge clk);
        repeat (4) begin
            load_seed(8'h00);
            @(negedge clk); auto_recover = 1; @(negedge clk); auto_recover = 0;
            repeat (3) @(posedge clk);
        end
        // seed load while locked and recovering
        load_seed(8'h00);
        @(negedge clk); auto_recover = 1; seed_we = 1; seed = 8'hFF; @(negedge clk); seed_we = 0; auto_recover = 0;
        // random control
        repeat (60) begin
            @(negedge clk);
            en = $urandom_range(0, 3) != 0;
            seed_we = $urandom_range(0, 15) == 0;
            seed = $urandom;
            auto_recover = $urandom_range(0, 1);
        end
        seed_we = 0;
        // asynchronous reset mid-cycle
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (3) @(posedge clk);
        $finish;
    end
endmodule
