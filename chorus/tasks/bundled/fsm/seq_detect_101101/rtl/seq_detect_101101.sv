// Overlapping detector for the serial pattern 1-0-1-1-0-1 (first bit first). Bits are
// taken on cycles with bit_valid; a gap of STALE_CYCLES cycles without a valid bit
// abandons a partial match. Matches are counted in a saturating counter.
module seq_detect_101101 #(
    parameter int STALE_CYCLES = 16  // at most 16
) (
    input  logic       clk,
    input  logic       rst_n,
    input  logic       bit_in,
    input  logic       bit_valid,
    input  logic       clear,
    output logic       match,
    output logic [3:0] match_count,
    output logic       saturated,
    output logic       stale,
    output logic [2:0] progress
);
    typedef enum logic [2:0] {
        S_NONE   = 3'd0,  // nothing matched
        S_1      = 3'd1,  // "1"
        S_10     = 3'd2,  // "10"
        S_101    = 3'd3,  // "101"
        S_1011   = 3'd4,  // "1011"
        S_10110  = 3'd5,  // "10110"
        S_MATCH  = 3'd6   // "101101"
    } state_t;

    state_t     state, next;
    logic [3:0] idle_cnt;

    always_comb begin
        next = state;
        case (state)
            S_NONE:  next = bit_in ? S_1    : S_NONE;
            S_1:     next = bit_in ? S_1    : S_10;
            S_10:    next = bit_in ? S_101  : S_NONE;
            S_101:   next = bit_in ? S_1011 : S_10;
            S_1011:  next = bit_in ? S_1    : S_10110;
            S_10110: next = bit_in ? S_MATCH : S_NONE;
            S_MATCH: next = bit_in ? S_1011 : S_10;
        endcase
    end

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            state       <= S_NONE;
            idle_cnt    <= '0;
            match_count <= '0;
            stale       <= 1'b0;
        end else begin
            stale <= 1'b0;
            if (bit_valid) begin
                state    <= next;
                idle_cnt <= '0;
                if (next == S_MATCH && match_count != 4'hF) match_count <= match_count + 1'b1;
            end else if (state != S_NONE) begin
                if (idle_cnt == 4'(STALE_CYCLES - 1)) begin
                    state    <= S_NONE;
                    idle_cnt <= '0;
                    stale    <= 1'b1;
                end else begin
                    idle_cnt <= idle_cnt + 1'b1;
                end
            end
            if (clear) match_count <= '0;
        end
    end

    assign match     = (state == S_MATCH);
    assign saturated = (match_count == 4'hF);
    assign progress  = state;
endmodule
