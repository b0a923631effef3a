`timescale 1ns/1ps
module tb_handshake_timeout;
    logic clk = 0, rst_n = 0, start = 0, ready = 0, cancel = 0, clear = 0;
    logic [7:0] data_in = '0;
    logic valid, busy, done, timeout_err, failed;
    logic [7:0] data_out;
    logic [1:0] retry_count;

    handshake_timeout uut (
        .clk(clk), .rst_n(rst_n), .start(start), .data_in(data_in), .ready(ready), .cancel(cancel),
        .clear(clear), .valid(valid), .data_out(data_out), .busy(busy), .done(done),
        .timeout_err(timeout_err), .failed(failed), .retry_count(retry_count)
    );

    always #5 clk = ~clk;

    task automatic send(input logic [7:0] d);
        data_in = d; start = 1; @(posedge clk); start = 0;
    endtask

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        @(posedge clk);
        // immediate accept
        send(8'hA5); ready = 1; repeat (3) @(posedge clk); ready = 0;
        // accept after a few stall cycles
        send(8'h5A); repeat (5) @(posedge clk); ready = 1; @(posedge clk); ready = 0;
        repeat (2) @(posedge clk);
        // one timeout, then accepted during the retry
        send(8'hFF); repeat (18) @(posedge clk); ready = 1; @(posedge clk); ready = 0;
        repeat (2) @(posedge clk);
        // cancel while sending and while backing off
        send(8'h00); repeat (3) @(posedge clk); cancel = 1; @(posedge clk); cancel = 0;
        send(8'h3C); repeat (13) @(posedge clk); cancel = 1; @(posedge clk); cancel = 0;
        repeat (2) @(posedge clk);
        // sink never answers: three timeouts and failure
        send(8'hC3); repeat (50) @(posedge clk);
        start = 1; repeat (3) @(posedge clk); start = 0;   // ignored while failed
        clear = 1; @(posedge clk); clear = 0;
        // random traffic
        repeat (300) begin
            @(negedge clk);
            start   = ($urandom % 6) == 0;
            data_in = $urandom;
            ready   = ($urandom % 5) == 0;
            cancel   = ($urandom % 40) == 0;
            clear   = ($urandom % 10) == 0;
        end
        start = 0; ready = 0; cancel = 0; clear = 0;
        // reset in the middle of a transfer
        send(8'h81); repeat (4) @(posedge clk);
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (3) @(posedge clk);
        $finish;
    end
endmodule
