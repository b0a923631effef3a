`timescale 1ns/1ps
module tb_spi_master_mode0;
    logic clk = 0, rst_n = 0, start = 0, lsb_first = 0, wait_ready = 0;
    logic [7:0] tx_byte = 0;
    logic sclk, mosi, cs_n, done, rdy_timeout, busy;
    logic [7:0] rx_byte;
    logic [7:0] slave_out = 8'h00;
    logic slave_bit = 0, slave_busy = 0;
    wire  miso = slave_busy ? 1'b0 : slave_bit;

    spi_master_mode0 dut (
        .clk(clk), .rst_n(rst_n), .start(start), .tx_byte(tx_byte), .lsb_first(lsb_first),
        .wait_ready(wait_ready), .miso(miso), .sclk(sclk), .mosi(mosi), .cs_n(cs_n),
        .rx_byte(rx_byte), .done(done), .rdy_timeout(rdy_timeout), .busy(busy)
    );

    always #5 clk = ~clk;

    // simple slave model: shifts slave_out MSB first, changing on falling edges
    always @(negedge sclk or negedge cs_n) begin
        slave_bit <= slave_out[7];
        slave_out <= {slave_out[6:0], slave_out[7]};
    end

    task automatic xfer(input logic [7:0] d, input logic lsb, input logic [7:0] s);
        @(negedge clk);
        slave_out = s; tx_byte = d; lsb_first = lsb; start = 1;
        @(negedge clk); start = 0;
        while (busy) @(negedge clk);
    endtask

    initial begin
        repeat (2) @(negedge clk);
        rst_n = 1;
        repeat (2) @(negedge clk);
        xfer(8'hA5, 0, 8'h3C);
        xfer(8'h5A, 1, 8'hC3);
        xfer(8'hFF, 0, 8'h00);
        xfer(8'h00, 1, 8'hFF);
        // burst of three bytes: start raised again for each following byte
        @(negedge clk);
        slave_out = 8'h96; tx_byte = 8'h81; lsb_first = 0; start = 1;
        @(negedge clk); start = 0;
        wait (done); @(negedge clk);
        repeat (8) @(negedge clk);
        tx_byte = 8'h7E; lsb_first = 1; start = 1;
        wait (done); @(negedge clk); start = 0;
        repeat (12) @(negedge clk);
        tx_byte = 8'h18; lsb_first = 0; start = 1;
        wait (done); @(negedge clk);
        start = 0;
        // start held across the gap and through a burst that hits MAX_BURST
        tx_byte = 8'h42; start = 1;
        repeat (2) wait (done); @(negedge clk);
        repeat (11) begin wait (done); @(negedge clk); end
        start = 0;
        while (busy) @(negedge clk);
        // wait for ready: slave busy for a few cycles, then ready
        wait_ready = 1; slave_busy = 1;
        @(negedge clk); slave_out = 8'hFF; tx_byte = 8'h99; start = 1; @(negedge clk); start = 0;
        repeat (6) @(negedge clk); slave_busy = 0;
        while (busy) @(negedge clk);
        // slave never ready: timeout
        slave_busy = 1;
        @(negedge clk); tx_byte = 8'h66; start = 1; @(negedge clk); start = 0;
        while (busy) @(negedge clk);
        slave_busy = 0;
        xfer(8'h24, 0, 8'hF0);
        wait_ready = 0;
        // random transfers
        repeat (10) xfer($urandom, $urandom, $urandom);
        // reset in the middle of a transfer
        @(negedge clk); tx_byte = 8'hC6; start = 1; @(negedge clk); start = 0;
        repeat (13) @(negedge clk);
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (3) @(negedge clk);
        $finish;
    end
endmodule
