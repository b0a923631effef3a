`timescale 1ns/1ps
module tb_crc16_step;
    logic [15:0] crc_in = '0, custom_poly = 16'h1021;
    logic [7:0] data = '0;
    logic [1:0] poly_sel = '0;
    logic start = 0, init_ones = 0;
    logic [15:0] crc_out;
    logic residue_ok, bad_poly;

    crc16_step dut (
        .crc_in(crc_in), .data(data), .poly_sel(poly_sel), .custom_poly(custom_poly),
        .start(start), .init_ones(init_ones),
        .crc_out(crc_out), .residue_ok(residue_ok), .bad_poly(bad_poly)
    );

    // Feed a message through the engine, then append its CRC (high byte first).
    task automatic message(input int len, input logic ones);
        logic [15:0] c;
        start = 1; init_ones = ones; data = 8'($urandom); #2;
        c = crc_out; start = 0;
        for (int i = 1; i < len; i++) begin
            crc_in = c; data = 8'($urandom); #2;
            c = crc_out;
        end
        crc_in = c; data = c[15:8]; #2;
        crc_in = crc_out; data = c[7:0]; #2;   // residue is zero here
    endtask

    initial begin
        void'($urandom(23));
        #5;
        for (int p = 0; p < 4; p++) begin
            poly_sel = p[1:0];
            message(4, 1'b0);
            message(6, 1'b1);
            message(1, 1'b1);
            // walking ones through crc_in and data
            for (int k = 0; k < 16; k++) begin
                crc_in = 16'h1 << k; data = 8'h1 << (k % 8); #2;
                crc_in = ~crc_in; data = ~data; #2;
            end
        end
        // custom polynomials, valid and invalid
        poly_sel = 2'd3;
        for (int k = 0; k < 16; k++) begin
            custom_poly = 16'h1 << k; crc_in = 16'hFFFF; data = 8'hFF; #2;
            custom_poly = ~(16'h1 << k); #2;
        end
        custom_poly = 16'h8BB7; message(5, 1'b1);
        custom_poly = 16'h0000; message(3, 1'b0);
        // random sweep
        repeat (300) begin
            crc_in = 16'($urandom); data = 8'($urandom); poly_sel = 2'($urandom);
            custom_poly = 16'($urandom); start = ($urandom % 8) == 0; init_ones = 1'($urandom);
            #2;
        end
        $finish;
    end
endmodule
