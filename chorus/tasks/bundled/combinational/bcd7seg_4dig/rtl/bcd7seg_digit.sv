// One BCD digit to seven segments (active-high), with lamp test, blanking,
// ripple blanking and an optional hexadecimal mode.
// Segment order: segs[6:0] = {g, f, e, d, c, b, a}.
module bcd7seg_digit (
    input  logic [3:0] bcd,
    input  logic       lamp_test,
    input  logic       blank,
    input  logic       rbi,        // ripple blanking in: suppress a zero digit
    input  logic       hex_en,     // show A-F for codes 10-15 instead of a dash
    output logic [6:0] segs,
    output logic       rbo,        // this digit was suppressed as a zero
    output logic       invalid
);
    always_comb begin
        rbo     = 1'b0;
        invalid = 1'b0;
        if (lamp_test) begin
            segs = 7'h7F;
        end else if (blank) begin
            segs = 7'h00;
        end else if (rbi && bcd == 4'd0) begin
            segs = 7'h00;
            rbo  = 1'b1;
        end else begin
            case (bcd)
                4'd0: segs = 7'h3F;
                4'd1: segs = 7'h06;
                4'd2: segs = 7'h5B;
                4'd3: segs = 7'h4F;
                4'd4: segs = 7'h66;
                4'd5: segs = 7'h6D;
                4'd6: segs = 7'h7D;
                4'd7: segs = 7'h07;
                4'd8: segs = 7'h7F;
                4'd9: segs = 7'h6F;
                default: begin
                    if (hex_en) begin
                        case (bcd)
                            4'hA:    segs = 7'h77;
                            4'hB:    segs = 7'h7C;
                            4'hC:    segs = 7'h39;
                            4'hD:    segs = 7'h5E;
                            4'hE:    segs = 7'h79;
                            default: segs = 7'h71;
                        endcase
                    end else begin
                        segs    = 7'h40;   // dash
                        invalid = 1'b1;
                    end
                end
            endcase
        end
    end
endmodule
