`timescale 1ns/1ps
module tb_uart_tx_parity;
    logic clk = 0, rst_n = 0, tx_start = 0, parity_en = 0, parity_odd = 0, two_stop = 0, stuff_en = 0;
    logic [7:0] tx_data = '0;
    logic tx, busy, tx_done;

    uart_tx_parity uut (
        .clk(clk), .rst_n(rst_n), .tx_start(tx_start), .tx_data(tx_data), .parity_en(parity_en),
        .parity_odd(parity_odd), .two_stop(two_stop), .stuff_en(stuff_en), .tx(tx), .busy(busy), .tx_done(tx_done)
    );

    always #5 clk = ~clk;

    task automatic send(input logic [7:0] d, input logic pe, input logic po, input logic ts);
        @(negedge clk);
        tx_data = d; parity_en = pe; parity_odd = po; two_stop = ts; tx_start = 1;
        @(negedge clk);
        tx_start = 0;
        // change the format inputs mid-frame: must be ignored
        parity_en = ~pe; two_stop = ~ts;
        while (busy) @(negedge clk);
    endtask

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        repeat (2) @(posedge clk);
        send(8'h55, 0, 0, 0);
        send(8'hAA, 1, 0, 0);
        send(8'h01, 1, 0, 1);
        send(8'h03, 1, 1, 0);
        send(8'hFE, 1, 1, 1);
        send(8'h80, 0, 0, 1);
        send(8'hFF, 1, 0, 0);
        send(8'h00, 1, 1, 1);
        // byte stuffing of the flag and escape bytes
        stuff_en = 1;
        send(8'h7E, 0, 0, 0);
        send(8'h7D, 1, 1, 1);
        send(8'h7E, 1, 0, 1);
        send(8'h7D, 1, 1, 0);
        send(8'h42, 1, 0, 0);
        stuff_en = 0;
        send(8'h7E, 0, 0, 0);
        // start requests while busy are ignored
        @(negedge clk); tx_data = 8'h96; tx_start = 1;
        repeat (20) @(negedge clk);
        tx_start = 0;
        while (busy) @(negedge clk);
        // random frames
        repeat (12) send($urandom, $urandom, $urandom, $urandom);
        // reset in the middle of a frame
        @(negedge clk); tx_data = 8'h3C; tx_start = 1; @(negedge clk); tx_start = 0;
        repeat (15) @(negedge clk);
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (4) @(posedge clk);
        $finish;
    end
endmodule
