`timescale 1ns/1ps
module tb_dec3to8_en;
    logic [2:0] sel = '0;
    logic [7:0] page = '0;
    logic en = 0, lamp_test = 0, active_low = 0;
    logic [7:0] y;
    logic any_active, upper_half;

    dec3to8_en uut (
        .sel(sel), .page(page), .en(en), .lamp_test(lamp_test), .active_low(active_low),
        .y(y), .any_active(any_active), .upper_half(upper_half)
    );

    initial begin
        #5;
        // every select value at the matching page, enabled and disabled, both polarities
        page = 8'hC3;
        for (int p = 0; p < 2; p++) begin
            active_low = p[0];
            for (int e = 0; e < 2; e++) begin
                en = e[0];
                for (int s = 0; s < 8; s++) begin
                    sel = s[2:0];
                    #5;
                end
            end
        end
        // non-matching pages (walk every page bit) while enabled
        en = 1; active_low = 0; sel = 3'd5;
        for (int b = 0; b < 8; b++) begin
            page = 8'hC3 ^ (8'h1 << b); #5;
            page = 8'hC3; #5;
        end
        page = 8'h00; #5;
        page = 8'hFF; #5;
        // lamp test with and without a decode, both polarities
        for (int k = 0; k < 8; k++) begin
            {lamp_test, en, active_low} = k[2:0];
            page = k[0] ? 8'hC3 : 8'h3C;
            sel = 3'd7 - k[2:0];
            #5;
        end
        lamp_test = 0; en = 1; active_low = 0; page = 8'hC3;
        for (int s = 7; s >= 0; s--) begin
            sel = s[2:0];
            #5;
        end
        en = 0; sel = 3'd0;
        #5;
        $finish;
    end
endmodule
