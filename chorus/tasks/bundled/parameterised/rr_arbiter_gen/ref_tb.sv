`timescale 1ns/1ps
module tb_rr_arbiter_gen;
    localparam int N = 5;
    logic clk = 0, rst_n = 0, en = 0, lock = 0;
    logic [N-1:0] req = '0;
    logic [N-1:0] gnt, starve;
    logic [$clog2(N)-1:0] gnt_idx;
    logic gnt_valid, any_starve;

    rr_arbiter_gen #(.N(N), .LIMIT(6)) dut (
        .clk(clk), .rst_n(rst_n), .en(en), .lock(lock), .req(req), .gnt(gnt), .gnt_idx(gnt_idx),
        .gnt_valid(gnt_valid), .starve(starve), .any_starve(any_starve)
    );

    always #5 clk = ~clk;

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        en = 1;
        // all requesters: full rotation, twice
        req = '1; repeat (12) @(posedge clk);
        // single requesters, then idle
        for (int i = 0; i < N; i++) begin
            req = N'(1) << i; repeat (2) @(posedge clk);
        end
        req = '0; repeat (2) @(posedge clk);
        // disabled arbitration with pending requests
        req = 5'b10101; en = 0; repeat (3) @(posedge clk); en = 1; repeat (3) @(posedge clk);
        // lock each requester in turn while all others wait: starvation
        for (int h = 0; h < N; h++) begin
            lock = 0; req = N'(1) << h; @(posedge clk);
            lock = 1; req = '1; repeat (9) @(posedge clk);
            lock = 0; repeat (2) @(posedge clk);
            req = '0; @(posedge clk);
        end
        // starvation cleared by the request dropping
        lock = 0; req = 5'b00001; @(posedge clk);
        lock = 1; req = 5'b00011; repeat (8) @(posedge clk);
        req = 5'b00001; repeat (2) @(posedge clk);
        lock = 0;
        // random traffic
        for (int k = 0; k < 200; k++) begin
            req  = $urandom;
            lock = $urandom_range(0, 3) == 0;
            en   = $urandom_range(0, 9) != 0;
            @(posedge clk);
        end
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (2) @(posedge clk);
        $finish;
    end
endmodule
