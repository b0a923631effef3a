// 4-requester round-robin arbiter with a starvation watchdog.
// The grant is combinational from req and the priority pointer; the
// pointer moves past the granted requester each cycle unless `hold` is high.
module rr_arbiter (
    input  logic       clk,
    input  logic       rst_n,
    input  logic [3:0] req,
    input  logic       hold,
    output logic [3:0] gnt,
    output logic       gnt_valid,
    output logic       starved
);
    localparam logic [2:0] WAIT_MAX = 3'd7;

    logic [1:0] ptr;           // requester with the highest priority
    logic [1:0] winner;
    logic [3:0] req_rot;       // req rotated so that bit 0 is requester ptr
    logic [1:0] offset;        // winner's distance from ptr
    logic [3:0][2:0] wait_cnt; // cycles each requester has waited, saturating
    logic [3:0] waited_out;

    // Rotate req so that bit 0 is the requester at ptr, then take the
    // first set bit: its offset from ptr is the winner.
    assign req_rot = 4'({req, req} >> ptr);

    always_comb begin
        casez (req_rot)
            4'b???1: offset = 2'd0;
            4'b??10: offset = 2'd1;
            4'b?100: offset = 2'd2;
            default: offset = 2'd3;   // 4'b1000, or no request at all
        endcase
    end

    assign winner = ptr + offset;

    assign gnt_valid = |req;
    assign gnt       = gnt_valid ? (4'b0001 << winner) : 4'b0000;

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) ptr <= 2'd0;
        else if (gnt_valid && !hold) ptr <= winner + 2'd1;
    end

    // Watchdog: a requester that is asking but not granted counts up; it
    // restarts from 0 when granted or when it drops its request.
    for (genvar i = 0; i < 4; i++) begin : g_wait
        always_ff @(posedge clk or negedge rst_n) begin
            if (!rst_n) wait_cnt[i] <= 3'd0;
            else if (!req[i] || gnt[i]) wait_cnt[i] <= 3'd0;
            else if (wait_cnt[i] != WAIT_MAX) wait_cnt[i] <= wait_cnt[i] + 3'd1;
        end
        assign waited_out[i] = (wait_cnt[i] == WAIT_MAX);
    end

    assign starved = |waited_out;
endmodule
