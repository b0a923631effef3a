`timescale 1ns/1ps
module tb_barrel_shift16;
    logic [15:0] din = '0;
    logic [3:0] amt = '0;
    logic [2:0] mode = '0;
    logic [15:0] dout;
    logic lost, zero, sat_sign, periodic, bad_mode;

    barrel_shift16 uut (
        .din(din), .amt(amt), .mode(mode),
        .dout(dout), .lost(lost), .zero(zero), .sat_sign(sat_sign), .periodic(periodic), .bad_mode(bad_mode)
    );

    logic [15:0] pats [6] = '{16'h0000, 16'hFFFF, 16'h8001, 16'h7FFE, 16'hA5C3, 16'h0100};

    initial begin
        void'($urandom(5));
        #5;
        for (int m = 0; m < 8; m++) begin
            mode = m[2:0];
            for (int s = 0; s < 16; s++) begin
                amt = s[3:0];
                foreach (pats[k]) begin
                    din = pats[k]; #2;
                end
            end
        end
        // arithmetic right shifts that saturate to pure sign bits
        mode = 3'd2;
        din = 16'h8000; amt = 4'd15; #2;
        din = 16'h4000; amt = 4'd15; #2;
        din = 16'hC000; amt = 4'd14; #2;
        din = 16'h0003; amt = 4'd2;  #2;
        // rotations of repeating patterns
        mode = 3'd3; din = 16'h5555; amt = 4'd2; #2;
        din = 16'h3C3C; amt = 4'd8; #2;
        mode = 3'd4; din = 16'hABAB; amt = 4'd8; #2;
        din = 16'h1111; amt = 4'd4; #2;
        // random sweep
        repeat (200) begin
            din = 16'($urandom); amt = 4'($urandom); mode = 3'($urandom % 5); #2;
        end
        $finish;
    end
endmodule
