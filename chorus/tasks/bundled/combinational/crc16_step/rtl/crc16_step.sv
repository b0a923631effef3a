// One-byte combinational CRC-16 update (MSB first) with selectable polynomial.
module crc16_step (
    input  logic [15:0] crc_in,
    input  logic [7:0]  data,
    input  logic [1:0]  poly_sel,
    input  logic [15:0] custom_poly,
    input  logic        start,       // use the initial value instead of crc_in
    input  logic        init_ones,   // initial value: 1 = 0xFFFF, 0 = 0x0000
    output logic [15:0] crc_out,
    output logic        residue_ok,  // updated CRC is zero
    output logic        bad_poly
);
    logic [15:0] poly;
    logic [15:0] c;

    always_comb begin
        bad_poly = 1'b0;
        case (poly_sel)
            2'd0: poly = 16'h1021;   // CCITT
            2'd1: poly = 16'h8005;   // IBM / ANSI
            2'd2: poly = 16'h3D65;   // DNP
            default: begin
                poly = custom_poly;
                // a usable generator needs the x^0 term
                if (!custom_poly[0])
                    bad_poly = 1'b1;
            end
        endcase
    end

    always_comb begin
        if (start)
            c = init_ones ? 16'hFFFF : 16'h0000;
        else
            c = crc_in;
        c = c ^ {data, 8'h00};
        for (int i = 0; i < 8; i++)
            c = c[15] ? ({c[14:0], 1'b0} ^ poly) : {c[14:0], 1'b0};
        crc_out    = c;
        residue_ok = 1'b0;
        if (c == 16'h0000)
            residue_ok = 1'b1;
    end
endmodule
