`timescale 1ns/1ps
module tb_rr_arbiter_hold;
    logic clk = 0, rst_n = 0;
    logic [3:0] req = '0, lock = '0;
    logic [3:0] gnt;
    logic [1:0] gnt_id;
    logic gnt_valid, preempt;

    rr_arbiter_hold uut (
        .clk(clk), .rst_n(rst_n), .req(req), .lock(lock), .gnt(gnt), .gnt_id(gnt_id),
        .gnt_valid(gnt_valid), .preempt(preempt)
    );

    always #5 clk = ~clk;

    initial begin
        repeat (2) @(negedge clk);
        rst_n = 1;
        @(negedge clk);
        // each requester alone, then released
        for (int i = 0; i < 4; i++) begin
            req = 4'b0001 << i; repeat (3) @(negedge clk);
            req = 0; repeat (2) @(negedge clk);
        end
        // everybody: round-robin rotation with wrap-around
        req = 4'b1111; repeat (10) @(negedge clk);
        req = 4'b1010; repeat (4) @(negedge clk);
        req = 4'b0101; repeat (4) @(negedge clk);
        req = 0; @(negedge clk);
        // short lock by each requester while others wait
        for (int i = 0; i < 4; i++) begin
            req = 4'b1111; lock = 4'b0001 << i;
            repeat (6) @(negedge clk);
            lock = 0; @(negedge clk);
        end
        // long lock with others waiting: pre-emption, for two owners
        req = 4'b1111; lock = 4'b1111;
        repeat (40) @(negedge clk);
        lock = 0; req = 0; @(negedge clk);
        // long lock with nobody else waiting: keeps the grant
        req = 4'b0100; lock = 4'b0100;
        repeat (36) @(negedge clk);
        lock = 0; @(negedge clk);
        req = 0; repeat (2) @(negedge clk);
        // random traffic
        repeat (400) begin
            @(negedge clk);
            req  = $urandom;
            lock = $urandom;
        end
        req = 0; lock = 0;
        repeat (2) @(negedge clk);
        req = 4'b1000; repeat (2) @(negedge clk);
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (3) @(negedge clk);
        $finish;
    end
endmodule
