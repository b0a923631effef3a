`timescale 1ns/1ps
module tb_sp_ram_be;
    localparam int AW = 5, DEPTH = 20;
    logic clk = 0, rst_n = 0, en = 0, we = 0;
    logic [AW-1:0] addr = '0;
    logic [3:0] be = '0;
    logic [31:0] wdata = '0;
    logic [31:0] rdata;
    logic rvalid, addr_err, be_err, wp_err, wp_active;
    logic [3:0] last_be;

    sp_ram_be #(.AW(AW), .DEPTH(DEPTH)) uut (
        .clk(clk), .rst_n(rst_n), .en(en), .we(we), .addr(addr), .be(be), .wdata(wdata), .rdata(rdata),
        .rvalid(rvalid), .addr_err(addr_err), .be_err(be_err), .wp_err(wp_err),
        .wp_active(wp_active), .last_be(last_be)
    );

    always #5 clk = ~clk;

    task automatic wr(input logic [AW-1:0] a, input logic [3:0] e, input logic [31:0] d);
        en = 1; we = 1; addr = a; be = e; wdata = d; @(posedge clk);
        en = 0; we = 0;
    endtask

    task automatic rd(input logic [AW-1:0] a);
        en = 1; we = 0; addr = a; @(posedge clk);
        en = 0;
    endtask

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        // full-word writes with complementary patterns, read back
        wr(0, 4'hF, 32'hFFFF_FFFF); wr(1, 4'hF, 32'h0000_0000);
        wr(2, 4'hF, 32'hA5A5_A5A5); wr(3, 4'hF, 32'h5A5A_5A5A);
        rd(0); rd(1); rd(2); rd(3); rd(0);
        // single byte lanes
        for (int b = 0; b < 4; b++) begin
            wr(5'(4 + b), 4'hF, 32'h0000_0000);
            wr(5'(4 + b), 4'(1 << b), 32'hFFFF_FFFF);
            rd(5'(4 + b));
        end
        wr(8, 4'b0101, 32'h1234_5678); wr(8, 4'b1010, 32'h9ABC_DEF0); rd(8);
        // configuration word: full write accepted, partial writes rejected
        wr(5'(DEPTH - 1), 4'hF, 32'hC0FF_EE00); rd(5'(DEPTH - 1));
        wr(5'(DEPTH - 1), 4'b0011, 32'h0); wr(5'(DEPTH - 1), 4'b1000, 32'h0); rd(5'(DEPTH - 1));
        // write protection: key without enable bit, then enabled
        wr(5'(DEPTH - 1), 4'hF, 32'hA500_0000); wr(0, 4'hF, 32'h1111_1111);
        wr(5'(DEPTH - 1), 4'hF, 32'hA5FF_FFFF);
        wr(0, 4'hF, 32'h2222_2222); wr(3, 4'b0001, 32'h0); wr(4, 4'hF, 32'h4444_4444); rd(0);
        wr(5'(DEPTH - 1), 4'hF, 32'h5A00_0001);     // wrong key: protection off
        wr(2, 4'hF, 32'h3333_3333);
        wr(5'(DEPTH - 1), 4'hF, 32'hA500_0001);     // on again, cleared later by reset
        wr(1, 4'hF, 32'h0);
        // out-of-range read and write
        rd(5'(DEPTH)); wr(5'd31, 4'hF, 32'h0); rd(5'd31); rd(2);
        #2 rst_n = 0; #4 rst_n = 1;
        // random accesses
        for (int k = 0; k < 300; k++) begin
            en    = $urandom_range(0, 4) != 0;
            we    = $urandom;
            addr  = $urandom_range(0, 2 ** AW - 1);
            be    = ($urandom_range(0, 1)) ? 4'hF : 4'($urandom);
            wdata = $urandom;
            @(posedge clk);
        end
        en = 0;
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (2) @(posedge clk);
        $finish;
    end
endmodule
