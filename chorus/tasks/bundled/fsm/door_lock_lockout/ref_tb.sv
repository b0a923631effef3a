`timescale 1ns/1ps
module tb_door_lock_lockout;
    logic clk = 0, rst_n = 0, key_valid = 0;
    logic [3:0] key = 0;
    logic unlocked, lockout, error, timeout, programming;
    logic [1:0] fail_count;
    logic [1:0] digits;

    door_lock_lockout uut (
        .clk(clk), .rst_n(rst_n), .key_valid(key_valid), .key(key), .unlocked(unlocked),
        .lockout(lockout), .error(error), .timeout(timeout), .programming(programming),
        .fail_count(fail_count), .digits(digits)
    );

    always #5 clk = ~clk;

    task automatic press(input logic [3:0] k);
        key = k; key_valid = 1; @(negedge clk);
        key_valid = 0; key = $urandom; @(negedge clk);
    endtask

    task automatic enter(input logic [15:0] c);
        for (int i = 3; i >= 0; i--) press(c[4*i +: 4]);
        repeat (4) @(negedge clk);
    endtask

    initial begin
        repeat (2) @(negedge clk);
        rst_n = 1;
        @(negedge clk);
        press(4'hC); press(4'hF); press(4'hE);          // ignored keys when idle
        enter(16'h2580);                                // correct: open, times out
        repeat (12) @(negedge clk);
        enter(16'h9580); enter(16'h2980);               // wrong first / second digit
        enter(16'h2580); press(4'hF);                   // open, relock with F (clears fails)
        enter(16'h2590); enter(16'h2581);               // wrong third / fourth digit
        enter(16'h1111);                                // third failure: lockout
        press(4'h2); press(4'h5);                       // ignored during lockout
        repeat (45) @(negedge clk);
        // abandoned entries
        press(4'h2); press(4'h5); repeat (25) @(negedge clk);
        press(4'h2); press(4'hB); press(4'h5); press(4'hA);
        press(4'h7); press(4'hA);
        press(4'h2); press(4'h5); press(4'h8); press(4'hA);
        // program 7777, then 8888, then 7777; abort one programming attempt
        enter(16'h2580); press(4'hE); press(4'h3); press(4'hA);
        enter(16'h2580); press(4'hE); press(4'hB); enter(16'h7777);
        enter(16'h7777); press(4'hE); enter(16'h8888);
        enter(16'h2580);                                // old code no longer works
        enter(16'h8888); press(4'hE); enter(16'h7777);
        enter(16'h7777); repeat (12) @(negedge clk);
        // random key presses
        repeat (300) begin
            @(negedge clk);
            key_valid = ($urandom % 3) == 0;
            key       = $urandom;
        end
        key_valid = 0;
        repeat (50) @(negedge clk);
        press(4'h7);
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (3) @(negedge clk);
        $finish;
    end
endmodule
