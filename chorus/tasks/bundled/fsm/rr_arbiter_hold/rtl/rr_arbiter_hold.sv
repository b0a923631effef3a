// Round-robin arbiter for four requesters. A granted requester may hold the grant by
// keeping its lock bit high, but only for MAX_HOLD cycles while others are waiting.
module rr_arbiter_hold #(
    parameter int MAX_HOLD = 16  // at most 16
) (
    input  logic       clk,
    input  logic       rst_n,
    input  logic [3:0] req,
    input  logic [3:0] lock,
    output logic [3:0] gnt,
    output logic [1:0] gnt_id,
    output logic       gnt_valid,
    output logic       preempt
);
    typedef enum logic [2:0] {
        S_IDLE = 3'd0,
        S_G0   = 3'd1,
        S_G1   = 3'd2,
        S_G2   = 3'd3,
        S_G3   = 3'd4
    } state_t;

    state_t     state, nxt_grant;
    logic [1:0] last;      // most recent owner: search starts after it
    logic [3:0] hold_cnt;
    logic [3:0] others;    // requesters other than the owner
    logic       owner_req, owner_lock;

    // First requester in `r` after position `after`, in rotating order.
    function automatic state_t pick(input logic [3:0] r, input logic [1:0] after);
        logic [1:0] idx;
        pick = S_IDLE;
        for (int k = 3; k >= 0; k--) begin
            idx = after + 2'(k + 1);
            if (r[idx]) pick = state_t'(3'(idx) + 3'd1);
        end
    endfunction

    assign gnt_valid  = (state != S_IDLE);
    assign gnt_id     = gnt_valid ? 2'(state - S_G0) : 2'd0;
    assign gnt        = gnt_valid ? (4'b0001 << gnt_id) : 4'b0000;
    assign owner_req  = |(req & gnt);
    assign owner_lock = |(lock & gnt);
    assign others     = req & ~gnt;
    assign nxt_grant  = pick(others, gnt_valid ? gnt_id : last);

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            state    <= S_IDLE;
            last     <= 2'd3;
            hold_cnt <= '0;
            preempt  <= 1'b0;
        end else begin
            preempt <= 1'b0;
            case (state)
                S_IDLE: begin
                    hold_cnt <= '0;
                    if (|req) state <= nxt_grant;
                end
                S_G0, S_G1, S_G2, S_G3: begin
                    if (owner_req && owner_lock) begin
                        if (hold_cnt != 4'(MAX_HOLD - 1)) begin
                            hold_cnt <= hold_cnt + 1'b1;
                        end else if (|others) begin
                            preempt  <= 1'b1;
                            last     <= gnt_id;
                            hold_cnt <= '0;
                            state    <= nxt_grant;
                        end
                    end else begin
                        hold_cnt <= '0;
                        last     <= gnt_id;
                        if (|others)        state <= nxt_grant;
                        else if (!owner_req) state <= S_IDLE;
                    end
                end
                default: state <= S_IDLE;
            endcase
        end
    end
endmodule
