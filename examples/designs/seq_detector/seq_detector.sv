// Serial pattern detector for 1101 (overlapping) with a saturating
// detection counter. Bits on `din` are consumed only when `en` is high.
module seq_detector (
    input  logic       clk,
    input  logic       rst_n,
    input  logic       en,
    input  logic       din,
    output logic       detected,
    output logic [3:0] det_count,
    output logic       saturated
);
    // State = longest suffix of the bits seen so far that is a prefix of 1101.
    typedef enum logic [1:0] {
        S_NONE = 2'd0,  // no useful prefix
        S_1    = 2'd1,  // "1"
        S_11   = 2'd2,  // "11"
        S_110  = 2'd3   // "110"
    } state_t;

    state_t state, next_state;
    logic   hit;

    assign saturated = (det_count == 4'hF);

    always_comb begin
        next_state = state;
        hit        = 1'b0;
        if (en) begin
            case (state)
                S_NONE: next_state = din ? S_1 : S_NONE;
                S_1:    next_state = din ? S_11 : S_NONE;
                S_11:   next_state = din ? S_11 : S_110;
                default: begin // S_110
                    if (din) begin
                        hit        = 1'b1;
                        next_state = S_1;   // trailing "1" starts the next match
                    end else begin
                        next_state = S_NONE;
                    end
                end
            endcase
        end
    end

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            state     <= S_NONE;
            detected  <= 1'b0;
            det_count <= 4'h0;
        end else begin
            state    <= next_state;
            detected <= hit;
            if (hit && !saturated) det_count <= det_count + 4'h1;
        end
    end
endmodule
