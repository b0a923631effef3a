`timescale 1ns/1ps
module tb_seq_detect_101101;
    logic clk = 0, rst_n = 0, bit_in = 0, bit_valid = 0, clear = 0;
    logic match, saturated, stale;
    logic [3:0] match_count;
    logic [2:0] progress;

    seq_detect_101101 uut (
        .clk(clk), .rst_n(rst_n), .bit_in(bit_in), .bit_valid(bit_valid), .clear(clear),
        .match(match), .match_count(match_count), .saturated(saturated), .stale(stale),
        .progress(progress)
    );

    always #5 clk = ~clk;

    task automatic send_bits(input logic [31:0] bits, input int n);
        for (int i = n - 1; i >= 0; i--) begin
            bit_in = bits[i]; bit_valid = 1; @(negedge clk);
        end
        bit_valid = 0;
    endtask

    initial begin
        repeat (2) @(negedge clk);
        rst_n = 1;
        @(negedge clk);
        send_bits(32'b101101, 6);             // single match
        send_bits(32'b101101101, 9);          // continues: overlapping match
        send_bits(32'b0, 1);                  // MATCH -> "10"
        send_bits(32'b0, 1);                  // "10" -> NONE
        send_bits(32'b11, 2);                 // "1" -> "1"
        send_bits(32'b0100, 4);               // "101" -> "10" -> NONE
        send_bits(32'b10111, 5);              // "1011" -> "1"
        send_bits(32'b0101100, 7);            // "10110" -> NONE
        send_bits(32'b10110, 5);              // partial match, then a short gap
        repeat (5) @(negedge clk);
        send_bits(32'b1, 1);                  // still completes
        send_bits(32'b101, 3);                // partial match, then a long gap: stale
        repeat (20) @(negedge clk);
        send_bits(32'b101101, 6);
        // saturate the counter: many overlapping matches
        repeat (8) send_bits(32'b101101101, 9);
        repeat (3) @(negedge clk);
        clear = 1; @(negedge clk); clear = 0;
        // random bit stream with occasional gaps
        repeat (600) begin
            @(negedge clk);
            bit_in    = $urandom;
            bit_valid = ($urandom % 4) != 0;
            clear     = ($urandom % 150) == 0;
        end
        bit_valid = 0; clear = 0;
        send_bits(32'b1011, 4);
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (3) @(negedge clk);
        $finish;
    end
endmodule
