// Per-requester starvation monitor: counts consecutive active cycles in
// which the request is pending but not granted. REQ_ID is the index of the
// requester it watches.
module starve_mon #(
    parameter int LIMIT  = 6,
    parameter int REQ_ID = 0
) (
    input  logic clk,
    input  logic rst_n,
    input  logic active,
    input  logic req,
    input  logic gnt,
    output logic starve
);
    localparam int CW = $clog2(LIMIT + 1);
    logic [CW-1:0] wait_cnt;

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            wait_cnt <= '0;
        end else if (!req || gnt) begin
            wait_cnt <= '0;
        end else if (active && wait_cnt != CW'(LIMIT)) begin
            wait_cnt <= wait_cnt + 1'b1;
        end
    end

    assign starve = (wait_cnt == CW'(LIMIT));
endmodule

// N-way round-robin arbiter with a grant lock and per-requester starvation
// monitors generated for every requester.
module rr_arbiter_gen #(
    parameter int N     = 5,
    parameter int LIMIT = 6
) (
    input  logic                 clk,
    input  logic                 rst_n,
    input  logic                 en,
    input  logic                 lock,
    input  logic [N-1:0]         req,
    output logic [N-1:0]         gnt,
    output logic [$clog2(N)-1:0] gnt_idx,
    output logic                 gnt_valid,
    output logic [N-1:0]         starve,
    output logic                 any_starve
);
    localparam int IW = $clog2(N);

    logic [IW-1:0] last_idx, nxt_idx;
    logic          found;
    logic          keep;
    logic [N-1:0]  gnt_c;

    // search the requesters after the last winner, wrapping around; the
    // loop runs from the farthest candidate down so the nearest one wins
    always_comb begin
        nxt_idx = last_idx;
        for (int k = N; k >= 1; k--) begin
            int c;
            c = (int'(last_idx) + k) % N;
            if (req[c])
                nxt_idx = IW'(c);
        end
    end

    assign found = |req;

    assign keep = lock && gnt_valid && req[gnt_idx];

    for (genvar i = 0; i < N; i++) begin : g_req
        assign gnt_c[i] = found && (nxt_idx == IW'(i));
        starve_mon #(.LIMIT(LIMIT), .REQ_ID(i)) u_mon (
            .clk(clk), .rst_n(rst_n), .active(en), .req(req[i]), .gnt(gnt[i]), .starve(starve[i])
        );
    end

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            gnt       <= '0;
            gnt_idx   <= '0;
            gnt_valid <= 1'b0;
            last_idx  <= IW'(N - 1);
        end else if (!en) begin
            gnt       <= '0;
            gnt_valid <= 1'b0;
        end else if (keep) begin
            gnt <= gnt;  // locked: hold the current grant
        end else if (found) begin
            gnt       <= gnt_c;
            gnt_idx   <= nxt_idx;
            gnt_valid <= 1'b1;
            last_idx  <= nxt_idx;
        end else begin
            gnt       <= '0;
            gnt_valid <= 1'b0;
        end
    end

    assign any_starve = |starve;
endmodule
