// Four-input minimum / maximum finder with signed or unsigned comparison.
module minmax4 (
    input  logic [7:0] a,
    input  logic [7:0] b,
    input  logic [7:0] c,
    input  logic [7:0] d,
    input  logic       signed_mode,
    output logic [7:0] min_val,
    output logic [7:0] max_val,
    output logic [1:0] min_idx,
    output logic [1:0] max_idx,
    output logic [7:0] range,
    output logic       all_equal,
    output logic       min_tie,     // more than one input holds the minimum
    output logic       full_scale   // inputs span the whole representable range
);
    function automatic logic less(input logic [7:0] x, input logic [7:0] y, input logic s);
        return s ? ($signed(x) < $signed(y)) : (x < y);
    endfunction

    logic [7:0] lo_ab, lo_cd, hi_ab, hi_cd;
    logic       lo_ab_i, lo_cd_i, hi_ab_i, hi_cd_i;  // position inside the pair
    logic [2:0] n_min;

    // First round: pairs (a,b) and (c,d); on a tie the lower index wins.
    always_comb begin
        if (less(b, a, signed_mode)) begin lo_ab = b; lo_ab_i = 1'b1; hi_ab = a; hi_ab_i = 1'b0; end
        else                         begin lo_ab = a; lo_ab_i = 1'b0; hi_ab = b; hi_ab_i = 1'b1; end
        if (less(d, c, signed_mode)) begin lo_cd = d; lo_cd_i = 1'b1; hi_cd = c; hi_cd_i = 1'b0; end
        else                         begin lo_cd = c; lo_cd_i = 1'b0; hi_cd = d; hi_cd_i = 1'b1; end
        if (b == a) begin hi_ab = a; hi_ab_i = 1'b0; end
        if (d == c) begin hi_cd = c; hi_cd_i = 1'b0; end
    end

    // Final round.
    always_comb begin
        if (less(lo_cd, lo_ab, signed_mode)) begin min_val = lo_cd; min_idx = {1'b1, lo_cd_i}; end
        else                                 begin min_val = lo_ab; min_idx = {1'b0, lo_ab_i}; end
        if (less(hi_ab, hi_cd, signed_mode)) begin max_val = hi_cd; max_idx = {1'b1, hi_cd_i}; end
        else                                 begin max_val = hi_ab; max_idx = {1'b0, hi_ab_i}; end
    end

    assign range     = max_val - min_val;
    assign all_equal = (a == b) && (b == c) && (c == d);
    assign n_min     = {2'b0, a == min_val} + {2'b0, b == min_val} + {2'b0, c == min_val} + {2'b0, d == min_val};
    assign min_tie   = (n_min > 3'd1);

    always_comb begin
        full_scale = 1'b0;
        if (signed_mode) begin
            if (min_val == 8'h80 && max_val == 8'h7F) full_scale = 1'b1;
        end else if (min_val == 8'h00 && max_val == 8'hFF) begin
            full_scale = 1'b1;
        end
    end
endmodule
