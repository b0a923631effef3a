`timescale 1ns/1ps
module tb_bcd7seg_4dig;
    logic [15:0] value = '0;
    logic lamp_test = 0, blank = 0, lz_suppress = 0, blank_zero = 0, hex_en = 0, active_low = 0;
    logic [27:0] seg;
    logic [3:0] lit;
    logic invalid;

    bcd7seg_4dig uut (
        .value(value), .lamp_test(lamp_test), .blank(blank), .lz_suppress(lz_suppress),
        .blank_zero(blank_zero), .hex_en(hex_en), .active_low(active_low),
        .seg(seg), .lit(lit), .invalid(invalid)
    );

    initial begin
        #5;
        // every code on every digit, decimal/hex, both polarities
        for (int m = 0; m < 4; m++) begin
            {active_low, hex_en} = m[1:0];
            for (int d = 0; d < 16; d++) begin
                value = {4{d[3:0]}}; #5;
                value = {d[3:0], 4'd0, d[3:0], 4'd0}; #5;
            end
        end
        active_low = 0; hex_en = 0;
        // leading-zero suppression with 0..4 leading zeros
        for (int z = 0; z < 2; z++) begin
            blank_zero = z[0];
            lz_suppress = 1;
            value = 16'h1234; #5;
            value = 16'h0234; #5;
            value = 16'h0034; #5;
            value = 16'h0004; #5;
            value = 16'h0000; #5;
            value = 16'h0102; #5;
            lz_suppress = 0;
            value = 16'h0000; #5;
        end
        // priorities of lamp test and blanking
        for (int k = 0; k < 8; k++) begin
            {lamp_test, blank, lz_suppress} = k[2:0];
            value = 16'h0000; #5;
            value = 16'h8F08; #5;
        end
        {lamp_test, blank, lz_suppress, blank_zero} = '0; value = 16'h9999; #5;
        $finish;
    end
endmodule
