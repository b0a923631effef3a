// 16-bit barrel shifter: logical left/right, arithmetic right, rotate left/right.
module barrel_shift16 (
    input  logic [15:0] din,
    input  logic [3:0]  amt,
    input  logic [2:0]  mode,
    output logic [15:0] dout,
    output logic        lost,      // a 1 was shifted out (shift modes only)
    output logic        zero,
    output logic        sat_sign,  // ASR produced a word of pure sign bits from a mixed input
    output logic        periodic,  // a non-zero rotate left the word unchanged
    output logic        bad_mode
);
    localparam logic [2:0] M_SLL = 3'd0, M_SRL = 3'd1, M_SRA = 3'd2, M_ROL = 3'd3, M_ROR = 3'd4;

    logic [31:0] wide;
    logic signed [30:0] swide;

    always_comb begin
        wide     = 32'd0;
        swide    = 31'sd0;
        periodic = 1'b0;
        lost     = 1'b0;
        sat_sign = 1'b0;
        bad_mode = 1'b0;
        case (mode)
            M_SLL: begin
                wide = {16'd0, din} << amt;
                dout = wide[15:0];
                lost = |wide[31:16];
            end
            M_SRL: begin
                wide = {1'b0, din, 15'd0} >> amt;
                dout = wide[30:15];
                lost = |wide[14:0];
            end
            M_SRA: begin
                swide = $signed({din, 15'd0}) >>> amt;
                dout  = swide[30:15];
                lost  = |swide[14:0];
                if ((dout == 16'hFFFF || dout == 16'h0000) && din != dout && amt != 4'd0)
                    sat_sign = 1'b1;
            end
            M_ROL, M_ROR: begin
                if (mode == M_ROL) begin
                    wide = {din, din} << amt;
                    dout = wide[31:16];
                end else begin
                    wide = {din, din} >> amt;
                    dout = wide[15:0];
                end
                if (amt != 4'd0 && dout == din)
                    periodic = 1'b1;
            end
            default: begin
                dout     = din;
                bad_mode = 1'b1;
            end
        endcase
        zero = (dout == 16'h0000);
    end
endmodule
