`timescale 1ns/1ps
module tb_pipe_stall_chain;
    localparam int N = 4, W = 8;
    logic clk = 0, rst_n = 0, flush = 0, in_valid = 0, out_ready = 0;
    logic [N-1:0] stall = '0;
    logic [W-1:0] in_data = '0;
    logic in_ready, out_valid, full, empty, hold_timeout;
    logic [W-1:0] out_data;
    logic [$clog2(N+1)-1:0] occupancy;

    pipe_stall_chain #(.N(N), .W(W), .HOLD_LIMIT(5)) uut (
        .clk(clk), .rst_n(rst_n), .flush(flush), .stall(stall), .in_valid(in_valid), .in_data(in_data),
        .in_ready(in_ready), .out_valid(out_valid), .out_data(out_data), .out_ready(out_ready),
        .occupancy(occupancy), .full(full), .empty(empty), .hold_timeout(hold_timeout)
    );

    always #5 clk = ~clk;

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        // free-flowing stream with data patterns that toggle every bit in every stage
        out_ready = 1; in_valid = 1;
        in_data = 8'h00; @(posedge clk);
        in_data = 8'hFF; @(posedge clk);
        in_data = 8'h55; @(posedge clk);
        in_data = 8'hAA; @(posedge clk);
        in_data = 8'hF0; @(posedge clk);
        in_data = 8'h0F; @(posedge clk);
        in_data = 8'hF5; @(posedge clk);
        in_data = 8'h00; @(posedge clk);
        in_valid = 0; repeat (6) @(posedge clk);
        // back-pressure: fill the pipeline, hold past the limit
        out_ready = 0; in_valid = 1;
        repeat (10) begin in_data = in_data + 8'h21; @(posedge clk); end
        in_valid = 0;
        repeat (3) @(posedge clk);
        // flush while full
        flush = 1; @(posedge clk); flush = 0;
        // stall each stage in turn while the output drains
        out_ready = 1; in_valid = 1;
        for (int s = 0; s < N; s++) begin
            repeat (3) @(posedge clk);
            stall = '0; stall[s] = 1'b1;
            repeat (3) @(posedge clk);
            stall = '0;
        end
        // random stalls, valid and ready
        for (int k = 0; k < 200; k++) begin
            in_valid  = $urandom_range(0, 3) != 0;
            in_data   = $urandom;
            stall     = ($urandom_range(0, 3) == 0) ? N'($urandom) : '0;
            out_ready = $urandom_range(0, 4) != 0;
            flush     = $urandom_range(0, 60) == 0;
            @(posedge clk);
        end
        flush = 0; stall = '0; in_valid = 0; out_ready = 1;
        repeat (8) @(posedge clk);
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (2) @(posedge clk);
        $finish;
    end
endmodule
