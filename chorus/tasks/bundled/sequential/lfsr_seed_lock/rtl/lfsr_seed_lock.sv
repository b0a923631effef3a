// 8-bit Galois LFSR (x^8 + x^6 + x^5 + x^4 + 1) with seed loading, a full-period
// marker, all-zero lock-up detection and optional automatic recovery.
module lfsr_seed_lock #(
    parameter logic [7:0] DEFAULT_SEED = 8'h01
) (
    input  logic       clk,
    input  logic       rst_n,
    input  logic       en,
    input  logic       seed_we,
    input  logic [7:0] seed,
    input  logic       auto_recover,
    output logic [7:0] state,
    output logic       bit_out,
    output logic       locked,
    output logic       lock_seen,
    output logic       period_done,
    output logic [7:0] step_cnt,
    output logic [1:0] recover_cnt
);
    localparam logic [7:0] TAPS = 8'hB8;
    localparam logic [7:0] LAST_STEP = 8'd254;  // 255 states per period

    logic [7:0] next_state;

    assign bit_out    = state[0];
    assign locked     = (state == 8'd0);
    assign next_state = {1'b0, state[7:1]} ^ (state[0] ? TAPS : 8'd0);

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            state       <= DEFAULT_SEED;
            step_cnt    <= 8'd0;
            period_done <= 1'b0;
            lock_seen   <= 1'b0;
            recover_cnt <= 2'd0;
        end else begin
            period_done <= 1'b0;
            if (locked)
                lock_seen <= 1'b1;
            if (seed_we) begin
                state    <= seed;
                step_cnt <= 8'd0;
            end else if (locked && auto_recover) begin
                state    <= DEFAULT_SEED;
                step_cnt <= 8'd0;
                if (recover_cnt != 2'd3)
                    recover_cnt <= recover_cnt + 1'b1;
            end else if (en && !locked) begin
                state <= next_state;
                if (step_cnt == LAST_STEP) begin
                    step_cnt    <= 8'd0;
                    period_done <= 1'b1;
                end else begin
                    step_cnt <= step_cnt + 1'b1;
                end
            end
        end
    end
endmodule
