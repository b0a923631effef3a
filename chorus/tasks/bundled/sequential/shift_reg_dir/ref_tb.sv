`timescale 1ns/1ps
module tb_shift_reg_dir;
    localparam int WIDTH = 8;
    logic clk = 0, rst_n = 0, load = 0, shift_en = 0, dir_right = 0, rotate = 0, serial_in = 0;
    logic [WIDTH-1:0] load_data = '0;
    logic [WIDTH-1:0] q;
    logic serial_out, all_ones, all_zeros, shifted_full;

    shift_reg_dir #(.WIDTH(WIDTH)) uut (
        .clk(clk), .rst_n(rst_n), .load(load), .load_data(load_data), .shift_en(shift_en),
        .dir_right(dir_right), .rotate(rotate), .serial_in(serial_in), .q(q),
        .serial_out(serial_out), .all_ones(all_ones), .all_zeros(all_zeros), .shifted_full(shifted_full)
    );

    always #5 clk = ~clk;

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        // shift ones in from the right end (left shift) until full
        shift_en = 1; dir_right = 0; serial_in = 1;
        repeat (WIDTH + 2) @(posedge clk);
        // shift zeros in from the left end (right shift)
        dir_right = 1; serial_in = 0;
        repeat (WIDTH + 2) @(posedge clk);
        shift_en = 0;
        // parallel loads toggling every load_data bit
        load = 1; load_data = 8'hA5; @(posedge clk);
        load_data = 8'h5A; @(posedge clk);
        load_data = 8'hFF; @(posedge clk);
        load_data = 8'h00; @(posedge clk);
        load_data = 8'h81; @(posedge clk);
        load = 0;
        // rotate both ways
        shift_en = 1; rotate = 1; dir_right = 1;
        repeat (5) @(posedge clk);
        dir_right = 0;
        repeat (WIDTH + 1) @(posedge clk);
        rotate = 0;
        // load while shifting has priority
        load = 1; load_data = 8'h3C; @(posedge clk); load = 0;
        // random shifting
        repeat (60) begin
            @(negedge clk);
            shift_en  = $urandom_range(0, 3) != 0;
            dir_right = $urandom_range(0, 1);
            rotate    = $urandom_range(0, 1);
            serial_in = $urandom_range(0, 1);
        end
        // asynchronous reset mid-cycle
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (3) @(posedge clk);
        $finish;
    end
endmodule
