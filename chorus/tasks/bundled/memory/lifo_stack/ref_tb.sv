`timescale 1ns/1ps
module tb_lifo_stack;
    localparam int DEPTH = 32, W = 8;
    logic clk = 0, rst_n = 0, push = 0, pop = 0, clear_err = 0;
    logic [W-1:0] din = '0;
    logic [4:0] peek_depth = '0;
    logic [W-1:0] top, peek_data;
    logic peek_err, empty, full, overflow, underflow;
    logic [5:0] count;

    lifo_stack #(.DEPTH(DEPTH), .W(W)) dut (
        .clk(clk), .rst_n(rst_n), .push(push), .pop(pop), .din(din), .clear_err(clear_err),
        .peek_depth(peek_depth), .top(top), .peek_data(peek_data), .peek_err(peek_err), .count(count),
        .empty(empty), .full(full), .overflow(overflow), .underflow(underflow)
    );

    always #5 clk = ~clk;

    task automatic op(input logic pu, input logic po, input logic [W-1:0] d);
        push = pu; pop = po; din = d; @(posedge clk); push = 0; pop = 0;
    endtask

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        // underflow on empty: pop, and push+pop
        op(0, 1, 8'h00); op(1, 1, 8'h11);
        clear_err = 1; @(posedge clk); clear_err = 0;
        // fill with alternating patterns, then overflow
        for (int i = 0; i < DEPTH; i++) op(1, 0, (i[0]) ? 8'hFF : 8'h00);
        op(1, 0, 8'h5A);
        // replace the top while full
        op(1, 1, 8'hA5);
        // peek at every depth while full
        for (int i = 0; i < DEPTH; i++) begin peek_depth = 5'(i); #2; end
        // drain (every entry reaches the top), then underflow
        for (int i = 0; i < DEPTH; i++) op(0, 1, 8'h00);
        op(0, 1, 8'h00);
        // clear in the same cycle as a new error: the error wins
        clear_err = 1; op(0, 1, 8'h00); clear_err = 0;
        clear_err = 1; @(posedge clk); clear_err = 0;
        // partly filled stack: peek past the bottom, replace the top
        op(1, 0, 8'h3C); op(1, 0, 8'hC3); op(1, 0, 8'h96);
        for (int i = 0; i < DEPTH; i++) begin peek_depth = 5'(i); #2; end
        op(1, 1, 8'h69); op(0, 1, 8'h00);
        // random operations
        for (int k = 0; k < 300; k++) begin
            push       = $urandom_range(0, 2) != 0;
            pop        = $urandom_range(0, 2) != 0;
            din        = $urandom;
            clear_err  = $urandom_range(0, 20) == 0;
            peek_depth = $urandom;
            @(posedge clk);
        end
        push = 0; pop = 0; clear_err = 0;
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (2) @(posedge clk);
        $finish;
    end
endmodule
