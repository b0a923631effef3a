`timescale 1ns/1ps
module tb_uart_rx_check;
    localparam int CPB = 8;
    logic clk = 0, rst_n = 0, rx = 1, parity_en = 0, parity_odd = 0, rd = 0;
    logic [7:0] rx_data;
    logic data_ready, parity_err, frame_err, overrun, glitch, break_det;

    uart_rx_check uut (
        .clk(clk), .rst_n(rst_n), .rx(rx), .parity_en(parity_en), .parity_odd(parity_odd), .rd(rd),
        .rx_data(rx_data), .data_ready(data_ready), .parity_err(parity_err), .frame_err(frame_err),
        .overrun(overrun), .glitch(glitch), .break_det(break_det)
    );

    always #5 clk = ~clk;

    task automatic bit_out(input logic b);
        rx = b;
        repeat (CPB) @(negedge clk);
    endtask

    // pe/po: parity format; flip_par: send the wrong parity; stop: stop bit value
    task automatic frame(input logic [7:0] d, input logic pe, input logic po,
                         input logic flip_par, input logic stop);
        parity_en = pe; parity_odd = po;
        bit_out(1'b0);
        for (int i = 0; i < 8; i++) bit_out(d[i]);
        if (pe) bit_out((^d) ^ po ^ flip_par);
        bit_out(stop);
        rx = 1;
        repeat (3) @(negedge clk);
    endtask

    task automatic read_byte();
        rd = 1; @(negedge clk); rd = 0;
    endtask

    initial begin
        repeat (2) @(negedge clk);
        rst_n = 1;
        repeat (4) @(negedge clk);
        frame(8'h55, 0, 0, 0, 1); read_byte();
        frame(8'hAA, 1, 0, 0, 1); read_byte();
        frame(8'h0F, 1, 1, 0, 1); read_byte();
        frame(8'hF0, 1, 0, 1, 1); read_byte();   // parity error (even)
        frame(8'h81, 1, 1, 1, 1); read_byte();   // parity error (odd)
        frame(8'h07, 1, 1, 0, 1); read_byte();
        frame(8'h3C, 0, 0, 0, 1);                // left unread
        frame(8'hC3, 0, 0, 0, 1);                // overrun
        frame(8'h7E, 1, 1, 0, 1);                // overrun again
        read_byte();
        frame(8'hFF, 0, 0, 0, 0);                // framing error, line returns high
        frame(8'h00, 1, 0, 0, 1);
        // read in the same cycle the next byte lands: no overrun
        fork
            frame(8'h12, 0, 0, 0, 1);
            begin repeat (78) @(negedge clk); rd = 1; @(negedge clk); rd = 0; end
        join
        // start glitch
        rx = 0; repeat (2) @(negedge clk); rx = 1; repeat (12) @(negedge clk);
        // break: zero byte with a low stop bit, then hold the line low
        parity_en = 1; parity_odd = 0;
        bit_out(1'b0);
        for (int i = 0; i < 10; i++) bit_out(1'b0);
        repeat (BREAK_HOLD) @(negedge clk);
        rx = 1; repeat (4 * CPB) @(negedge clk);
        read_byte();
        // random bytes and formats
        repeat (10) begin
            frame($urandom, $urandom, $urandom, ($urandom % 4) == 0, ($urandom % 5) != 0);
            if ($urandom % 2) read_byte();
        end
        // reset in the middle of a frame
        parity_en = 0;
        bit_out(1'b0); bit_out(1'b1); bit_out(1'b0);
        #2 rst_n = 0; #4 rst_n = 1;
        rx = 1; repeat (4) @(negedge clk);
        $finish;
    end

    localparam int BREAK_HOLD = 10 * CPB;
endmodule
