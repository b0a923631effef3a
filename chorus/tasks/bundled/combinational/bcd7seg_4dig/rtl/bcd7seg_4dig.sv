// Four-digit seven-segment display decoder with leading-zero suppression.
// Digit 3 is the most significant; seg[7*i +: 7] drives digit i.
module bcd7seg_4dig (
    input  logic [15:0] value,
    input  logic        lamp_test,
    input  logic        blank,
    input  logic        lz_suppress,  // blank leading zeros
    input  logic        blank_zero,   // with lz_suppress: show nothing at all for 0000
    input  logic        hex_en,
    input  logic        active_low,
    output logic [27:0] seg,
    output logic [3:0]  lit,          // digit i shows something
    output logic        invalid       // some digit shows a dash
);
    logic [27:0] segs;
    logic [3:0]  rbi, rbo, inv;

    assign rbi[3] = lz_suppress;
    assign rbi[2] = rbo[3];
    assign rbi[1] = rbo[2];
    assign rbi[0] = rbo[1] && blank_zero;

    bcd7seg_digit d3 (.bcd(value[15:12]), .lamp_test(lamp_test), .blank(blank), .rbi(rbi[3]),
                      .hex_en(hex_en), .segs(segs[27:21]), .rbo(rbo[3]), .invalid(inv[3]));
    bcd7seg_digit d2 (.bcd(value[11:8]), .lamp_test(lamp_test), .blank(blank), .rbi(rbi[2]),
                      .hex_en(hex_en), .segs(segs[20:14]), .rbo(rbo[2]), .invalid(inv[2]));
    bcd7seg_digit d1 (.bcd(value[7:4]), .lamp_test(lamp_test), .blank(blank), .rbi(rbi[1]),
                      .hex_en(hex_en), .segs(segs[13:7]), .rbo(rbo[1]), .invalid(inv[1]));
    bcd7seg_digit d0 (.bcd(value[3:0]), .lamp_test(lamp_test), .blank(blank), .rbi(rbi[0]),
                      .hex_en(hex_en), .segs(segs[6:0]), .rbo(rbo[0]), .invalid(inv[0]));

    assign seg     = active_low ? ~segs : segs;
    assign lit     = {|segs[27:21], |segs[20:14], |segs[13:7], |segs[6:0]};
    assign invalid = |inv;
endmodule
