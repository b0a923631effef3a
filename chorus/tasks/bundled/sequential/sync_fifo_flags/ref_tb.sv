`timescale 1ns/1ps
module tb_sync_fifo_flags;
    localparam int WIDTH = 8, DEPTH = 64;
    logic clk = 0, rst_n = 0, wr_en = 0, rd_en = 0, clear_err = 0;
    logic [WIDTH-1:0] wr_data = '0;
    logic [WIDTH-1:0] rd_data;
    logic rd_valid, full, empty, almost_full, almost_empty, overflow, underflow;
    logic [6:0] count, high_water;

    sync_fifo_flags #(.WIDTH(WIDTH), .DEPTH(DEPTH)) dut (
        .clk(clk), .rst_n(rst_n), .wr_en(wr_en), .wr_data(wr_data), .rd_en(rd_en),
        .clear_err(clear_err), .rd_data(rd_data), .rd_valid(rd_valid), .full(full), .empty(empty),
        .almost_full(almost_full), .almost_empty(almost_empty), .overflow(overflow),
        .underflow(underflow), .count(count), .high_water(high_water)
    );

    always #5 clk = ~clk;

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        // read while empty -> underflow, also write+read while empty
        @(negedge clk); rd_en = 1;
        @(negedge clk); wr_en = 1; wr_data = 8'h11;
        @(negedge clk); rd_en = 0; wr_en = 0;
        @(negedge clk); clear_err = 1; rd_en = 1;
        @(negedge clk); clear_err = 0; rd_en = 0;
        // fill completely with alternating patterns
        for (int i = 0; i < DEPTH; i++) begin
            @(negedge clk); wr_en = 1; wr_data = (i % 2) ? 8'hAA : 8'h55;
        end
        // keep writing while full -> overflow
        @(negedge clk); wr_data = 8'hFF;
        @(negedge clk);
        // write and read together while full
        @(negedge clk); rd_en = 1; wr_data = 8'h00;
        @(negedge clk); rd_en = 1; wr_data = 8'hFF;
        @(negedge clk); wr_en = 0; rd_en = 0; clear_err = 1; wr_en = 1;
        @(negedge clk); clear_err = 0; wr_en = 0;
        // drain completely and keep reading
        rd_en = 1;
        repeat (DEPTH + 3) @(negedge clk);
        rd_en = 0;
        // pointers wrap, random traffic
        repeat (200) begin
            @(negedge clk);
            wr_en     = $urandom_range(0, 99) < 55;
            rd_en     = $urandom_range(0, 99) < 45;
            wr_data   = $urandom;
            clear_err = $urandom_range(0, 15) == 0;
        end
        wr_en = 0; rd_en = 0;
        // asynchronous reset mid-cycle
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (3) @(posedge clk);
        $finish;
    end
endmodule
