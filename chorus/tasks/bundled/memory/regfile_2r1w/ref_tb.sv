`timescale 1ns/1ps
module tb_regfile_2r1w;
    localparam int NREG = 16, W = 16, AW = 4;
    logic clk = 0, rst_n = 0, we = 0, unlock = 0;
    logic [AW-1:0] waddr = '0, raddr1 = '0, raddr2 = '0;
    logic [W-1:0] wdata = '0;
    logic [W-1:0] rdata1, rdata2;
    logic fwd1, fwd2, r0_write, prot_err, locked;

    regfile_2r1w #(.NREG(NREG), .W(W)) uut (
        .clk(clk), .rst_n(rst_n), .we(we), .waddr(waddr), .wdata(wdata), .unlock(unlock),
        .raddr1(raddr1), .raddr2(raddr2), .rdata1(rdata1), .rdata2(rdata2), .fwd1(fwd1), .fwd2(fwd2),
        .r0_write(r0_write), .prot_err(prot_err), .locked(locked)
    );

    always #5 clk = ~clk;

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        // fill all registers (including an attempt on r0), alternating patterns
        for (int pass = 0; pass < 2; pass++) begin
            we = 1;
            for (int r = 0; r < NREG; r++) begin
                waddr = AW'(r); wdata = (pass == 0) ? 16'hFFFF : 16'h0000;
                raddr1 = AW'(r); raddr2 = AW'(NREG - 1 - r);
                @(posedge clk);
            end
            we = 0;
            for (int r = 0; r < NREG; r++) begin
                raddr1 = AW'(r); raddr2 = AW'((r + 5) % NREG); #5;
            end
        end
        // forwarding on each port, then on both
        we = 1; waddr = 4'd6; wdata = 16'hA5A5; raddr1 = 4'd6; raddr2 = 4'd1; @(posedge clk);
        waddr = 4'd7; wdata = 16'h5A5A; raddr1 = 4'd2; raddr2 = 4'd7; @(posedge clk);
        waddr = 4'd9; wdata = 16'h1234; raddr1 = 4'd9; raddr2 = 4'd9; @(posedge clk);
        // write to r0 while reading r0 on both ports
        waddr = 4'd0; wdata = 16'hFFFF; raddr1 = 4'd0; raddr2 = 4'd0; @(posedge clk);
        // lock with the key, then: protected write (no forwarding), unprotected writes
        waddr = 4'd15; wdata = 16'hC0DE; raddr1 = 4'd15; raddr2 = 4'd14; @(posedge clk);
        waddr = 4'd12; wdata = 16'hDEAD; raddr1 = 4'd12; raddr2 = 4'd3; @(posedge clk);
        waddr = 4'd8;  wdata = 16'hBEEF; raddr1 = 4'd8;  raddr2 = 4'd8; @(posedge clk);
        waddr = 4'd3;  wdata = 16'h0F0F; raddr1 = 4'd3;  raddr2 = 4'd3; @(posedge clk);
        // unlock together with a key write: unlock wins
        unlock = 1; waddr = 4'd15; wdata = 16'hC0DE; @(posedge clk);
        unlock = 0; we = 0; @(posedge clk); we = 1;
        waddr = 4'd12; wdata = 16'hF0F0; raddr1 = 4'd12; raddr2 = 4'd12; @(posedge clk);
        // key written to another register does not lock
        waddr = 4'd14; wdata = 16'hC0DE; @(posedge clk);
        // lock again and clear by reset later
        waddr = 4'd15; wdata = 16'hC0DE; @(posedge clk);
        waddr = 4'd9; wdata = 16'h4321; @(posedge clk);
        we = 0; @(posedge clk);
        // random traffic
        for (int k = 0; k < 300; k++) begin
            we      = $urandom;
            waddr   = $urandom;
            wdata   = $urandom;
            unlock  = $urandom_range(0, 15) == 0;
            if ($urandom_range(0, 20) == 0) begin waddr = 4'd15; wdata = 16'hC0DE; end
            raddr1  = ($urandom_range(0, 3) == 0) ? waddr : AW'($urandom);
            raddr2  = ($urandom_range(0, 3) == 0) ? waddr : AW'($urandom);
            @(posedge clk);
        end
        we = 0;
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (2) @(posedge clk);
        $finish;
    end
endmodule
