`timescale 1ns/1ps
module tb_dp_ram_rdw;
    localparam int AW = 5, DW = 8;
    logic clk = 0, rst_n = 0, we_a = 0, re_b = 0;
    logic [1:0] rdw_mode = 2'b00;
    logic [AW-1:0] addr_a = '0, addr_b = '0;
    logic [DW-1:0] wdata_a = '0;
    logic [DW-1:0] rdata_b;
    logic rvalid_b, collision, mode_err, hot_spot;
    logic [AW-1:0] coll_addr;

    dp_ram_rdw #(.AW(AW), .DW(DW)) dut (
        .clk(clk), .rst_n(rst_n), .rdw_mode(rdw_mode), .we_a(we_a), .addr_a(addr_a), .wdata_a(wdata_a),
        .re_b(re_b), .addr_b(addr_b), .rdata_b(rdata_b), .rvalid_b(rvalid_b), .collision(collision),
        .coll_addr(coll_addr), .mode_err(mode_err), .hot_spot(hot_spot)
    );

    always #5 clk = ~clk;

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        // fill every word, then read everything back
        we_a = 1;
        for (int i = 0; i < 2 ** AW; i++) begin
            addr_a = AW'(i); wdata_a = (i[0]) ? 8'hFF : 8'h00; @(posedge clk);
        end
        we_a = 0; re_b = 1;
        for (int i = 0; i < 2 ** AW; i++) begin
            addr_b = AW'(i); @(posedge clk);
        end
        re_b = 0;
        // collisions in every mode at complementary addresses
        for (int m = 0; m < 4; m++) begin
            rdw_mode = m[1:0];
            we_a = 1; re_b = 1;
            addr_a = 5'b10101; addr_b = 5'b10101; wdata_a = 8'h5A; @(posedge clk);
            addr_a = 5'b01010; addr_b = 5'b01010; wdata_a = 8'hA5; @(posedge clk);
            addr_a = 5'b11111; addr_b = 5'b11111; wdata_a = 8'h3C; @(posedge clk);
            addr_a = 5'b00000; addr_b = 5'b00000; wdata_a = 8'hC3; @(posedge clk);
            // no collision: different addresses
            addr_a = 5'd3; addr_b = 5'd4; @(posedge clk);
            we_a = 0; re_b = 0; @(posedge clk);
        end
        // back-to-back collisions on one address
        rdw_mode = 2'b01; we_a = 1; re_b = 1; addr_a = 5'd9; addr_b = 5'd9;
        wdata_a = 8'h11; @(posedge clk); wdata_a = 8'h22; @(posedge clk);
        we_a = 0; re_b = 0; @(posedge clk);
        #2 rst_n = 0; #4 rst_n = 1;
        // random traffic with a narrowed address range to produce collisions
        for (int k = 0; k < 300; k++) begin
            rdw_mode = $urandom;
            we_a     = $urandom;
            re_b     = $urandom;
            addr_a   = $urandom_range(0, 7);
            addr_b   = $urandom_range(0, 7);
            wdata_a  = $urandom;
            @(posedge clk);
        end
        we_a = 0; re_b = 0;
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (2) @(posedge clk);
        $finish;
    end
endmodule
