`timescale 1ns/1ps
module tb_clk_div_n;
    logic clk = 0, rst_n = 0, en = 0, div_we = 0;
    logic [7:0] div_in = 0;
    logic clk_out, bypass, odd_mode, sync_pulse;
    logic [7:0] div_active;

    clk_div_n uut (
        .clk(clk), .rst_n(rst_n), .en(en), .div_we(div_we), .div_in(div_in), .clk_out(clk_out),
        .bypass(bypass), .odd_mode(odd_mode), .sync_pulse(sync_pulse), .div_active(div_active)
    );

    always #5 clk = ~clk;

    task automatic set_div(input logic [7:0] n, input int cycles);
        @(negedge clk); div_we = 1; div_in = n; @(negedge clk); div_we = 0;
        repeat (cycles) @(posedge clk);
    endtask

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        // default ratio 2
        en = 1;
        repeat (8) @(posedge clk);
        // odd and even ratios while running
        set_div(8'd3, 12);
        set_div(8'd4, 12);
        set_div(8'd5, 15);
        set_div(8'd10, 30);
        set_div(8'd15, 40);
        set_div(8'd255, 520);
        set_div(8'd170, 350);
        set_div(8'd85, 180);
        set_div(8'd1, 5);      // bypass
        set_div(8'd0, 5);      // bypass
        set_div(8'd7, 20);
        // disable, change ratio while disabled, enable again
        @(negedge clk); en = 0; repeat (3) @(posedge clk);
        set_div(8'd9, 2);
        @(negedge clk); div_we = 1; div_in = 8'd6; @(negedge clk); div_we = 0;
        @(negedge clk); en = 1; repeat (20) @(posedge clk);
        set_div(8'd8, 20);
        // random ratios and enables
        repeat (12) begin
            @(negedge clk);
            en = $urandom_range(0, 4) != 0;
            set_div(8'($urandom_range(0, 40)), $urandom_range(3, 60));
        end
        // asynchronous reset mid-cycle
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (3) @(posedge clk);
        $finish;
    end
endmodule
