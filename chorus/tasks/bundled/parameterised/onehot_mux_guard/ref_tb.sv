`timescale 1ns/1ps
module tb_onehot_mux_guard;
    localparam int N = 6, W = 8;
    logic clk = 0, rst_n = 0, clear_err = 0;
    logic [N-1:0] sel = '0;
    logic [N*W-1:0] data = '0;
    logic [W-1:0] y;
    logic [$clog2(N)-1:0] out_idx;
    logic none_err, multi_err, err_sat;
    logic [3:0] err_count;

    onehot_mux_guard #(.N(N), .W(W)) uut (
        .clk(clk), .rst_n(rst_n), .sel(sel), .data(data), .clear_err(clear_err), .y(y), .out_idx(out_idx),
        .none_err(none_err), .multi_err(multi_err), .err_count(err_count), .err_sat(err_sat)
    );

    always #5 clk = ~clk;

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        // every lane, every data bit both ways
        for (int i = 0; i < N; i++) begin
            sel = N'(1) << i;
            data = {N{8'hFF}}; @(posedge clk);
            data = {N{8'h00}}; @(posedge clk);
            data = {N{8'h5A}}; @(posedge clk);
            data = {N{8'hA5}}; @(posedge clk);
        end
        clear_err = 1; @(posedge clk); clear_err = 0;
        // error conditions: none, multiple; saturate the counter
        sel = '0; repeat (3) @(posedge clk);
        sel = 6'b100001; repeat (3) @(posedge clk);
        sel = 6'b111111; repeat (12) @(posedge clk);
        sel = 6'b000100; @(posedge clk);
        clear_err = 1; sel = '0; @(posedge clk); clear_err = 0;
        // random selects (mostly one-hot) and data
        for (int k = 0; k < 200; k++) begin
            sel       = ($urandom_range(0, 3) != 0) ? (N'(1) << $urandom_range(0, N - 1)) : N'($urandom);
            data      = {$urandom, $urandom};
            clear_err = $urandom_range(0, 30) == 0;
            @(posedge clk);
        end
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (2) @(posedge clk);
        $finish;
    end
endmodule
