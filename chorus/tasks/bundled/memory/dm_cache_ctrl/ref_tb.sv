`timescale 1ns/1ps
module tb_dm_cache_ctrl;
    localparam int LINES = 8, TAGW = 4, AW = TAGW + 3;
    logic clk = 0, rst_n = 0, req = 0, req_wr = 0, flush = 0, mem_ack = 0;
    logic [AW-1:0] req_addr = '0;
    logic ready, resp_valid, resp_hit, mem_rd_req, mem_wb_req;
    logic [AW-1:0] mem_addr;
    logic [LINES-1:0] valid_bits, dirty_bits;
    int ack_delay = 1;

    dm_cache_ctrl #(.LINES(LINES), .TAGW(TAGW)) uut (
        .clk(clk), .rst_n(rst_n), .req(req), .req_wr(req_wr), .req_addr(req_addr), .flush(flush),
        .mem_ack(mem_ack), .ready(ready), .resp_valid(resp_valid), .resp_hit(resp_hit),
        .mem_rd_req(mem_rd_req), .mem_wb_req(mem_wb_req), .mem_addr(mem_addr),
        .valid_bits(valid_bits), .dirty_bits(dirty_bits)
    );

    always #5 clk = ~clk;

    // memory model: acknowledge a request after ack_delay cycles
    always begin
        @(posedge clk);
        if ((mem_rd_req || mem_wb_req) && !mem_ack) begin
            repeat (ack_delay) @(posedge clk);
            #1 mem_ack = 1;
            @(posedge clk);
            #1 mem_ack = 0;
        end
    end

    task automatic access(input logic wr, input logic [AW-1:0] a);
        while (!ready) @(posedge clk);
        #1 req = 1; req_wr = wr; req_addr = a;
        @(posedge clk);
        #1 req = 0;
        @(posedge clk);
        while (!ready) @(posedge clk);
    endtask

    task automatic do_flush();
        while (!ready) @(posedge clk);
        #1 flush = 1; @(posedge clk); #1 flush = 0;
        @(posedge clk);
        while (!ready) @(posedge clk);
    endtask

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        // clean flush of an empty cache
        do_flush();
        // fill every line: even lines by write (dirty), odd lines by read
        for (int i = 0; i < LINES; i++) access(i[0] == 0, {4'b0000, 3'(i)});
        // hits
        for (int i = 0; i < LINES; i++) access(i[1], {4'b0000, 3'(i)});
        // conflicting tags evict every line (dirty ones get written back)
        ack_delay = 3;
        for (int i = 0; i < LINES; i++) access(1'b1, {4'b1111, 3'(i)});
        ack_delay = 0;
        for (int i = 0; i < LINES; i++) access(1'b0, {4'b0101, 3'(i)});
        for (int i = 0; i < LINES; i++) access(1'b1, {4'b1010, 3'(i)});
        access(1'b0, {4'b1010, 3'd5});
        // flush with every line dirty
        ack_delay = 2;
        do_flush();
        // partly dirty cache, flush again
        access(1'b1, 7'h12); access(1'b0, 7'h25); access(1'b1, 7'h3F);
        do_flush();
        // random traffic
        ack_delay = 1;
        for (int k = 0; k < 120; k++) begin
            ack_delay = $urandom_range(0, 2);
            if ($urandom_range(0, 25) == 0) do_flush();
            else access($urandom, $urandom_range(0, 2 ** AW - 1));
        end
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (2) @(posedge clk);
        $finish;
    end
endmodule
