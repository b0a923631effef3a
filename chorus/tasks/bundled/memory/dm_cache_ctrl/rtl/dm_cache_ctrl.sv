// Direct-mapped write-back cache controller: tag, valid and dirty state for
// LINES lines, hit/miss detection, dirty-line write-back before a refill,
// and a flush sequence that writes back every dirty line and invalidates
// the whole cache. Only the control and tag path is modelled (no data).
module dm_cache_ctrl #(
    parameter int LINES = 8,
    parameter int TAGW  = 4
) (
    input  logic                           clk,
    input  logic                           rst_n,
    input  logic                           req,
    input  logic                           req_wr,
    input  logic [TAGW+$clog2(LINES)-1:0]  req_addr,
    input  logic                           flush,
    input  logic                           mem_ack,
    output logic                           ready,
    output logic                           resp_valid,
    output logic                           resp_hit,
    output logic                           mem_rd_req,
    output logic                           mem_wb_req,
    output logic [TAGW+$clog2(LINES)-1:0]  mem_addr,
    output logic [LINES-1:0]               valid_bits,
    output logic [LINES-1:0]               dirty_bits
);
    localparam int IW = $clog2(LINES);

    typedef enum logic [2:0] {
        S_IDLE, S_LOOKUP, S_WB, S_FILL, S_RESP, S_FL_CHK, S_FL_WB
    } state_t;

    state_t          state;
    logic [TAGW-1:0] tags [0:LINES-1];
    logic [TAGW-1:0] cur_tag;
    logic [IW-1:0]   cur_idx;
    logic            cur_wr;
    logic [IW-1:0]   fl_idx;
    logic            hit;

    assign hit        = valid_bits[cur_idx] && (tags[cur_idx] == cur_tag);
    assign ready      = (state == S_IDLE);
    assign mem_rd_req = (state == S_FILL);
    assign mem_wb_req = (state == S_WB) || (state == S_FL_WB);

    always_comb begin
        case (state)
            S_WB:    mem_addr = {tags[cur_idx], cur_idx};
            S_FL_WB: mem_addr = {tags[fl_idx], fl_idx};
            default: mem_addr = {cur_tag, cur_idx};
        endcase
    end

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            state      <= S_IDLE;
            valid_bits <= '0;
            dirty_bits <= '0;
            cur_tag    <= '0;
            cur_idx    <= '0;
            cur_wr     <= 1'b0;
            fl_idx     <= '0;
            resp_valid <= 1'b0;
            resp_hit   <= 1'b0;
        end else begin
            resp_valid <= 1'b0;
            case (state)
                S_IDLE: begin
                    if (flush) begin
                        fl_idx <= '0;
                        state  <= S_FL_CHK;
                    end else if (req) begin
                        {cur_tag, cur_idx} <= req_addr;
                        cur_wr             <= req_wr;
                        state              <= S_LOOKUP;
                    end
                end
                S_LOOKUP: begin
                    if (hit) begin
                        if (cur_wr)
                            dirty_bits[cur_idx] <= 1'b1;
                        resp_hit <= 1'b1;
                        state    <= S_RESP;
                    end else if (valid_bits[cur_idx] && dirty_bits[cur_idx]) begin
                        state <= S_WB;      // evict a dirty line first
                    end else begin
                        state <= S_FILL;
                    end
                end
                S_WB: begin
                    if (mem_ack) begin
                        dirty_bits[cur_idx] <= 1'b0;
                        state               <= S_FILL;
                    end
                end
                S_FILL: begin
                    if (mem_ack) begin
                        tags[cur_idx]       <= cur_tag;
                        valid_bits[cur_idx] <= 1'b1;
                        dirty_bits[cur_idx] <= cur_wr;
                        resp_hit            <= 1'b0;
                        state               <= S_RESP;
                    end
                end
                S_RESP: begin
                    resp_valid <= 1'b1;
                    state      <= S_IDLE;
                end
                S_FL_CHK: begin
                    if (valid_bits[fl_idx] && dirty_bits[fl_idx]) begin
                        state <= S_FL_WB;
                    end else begin
                        valid_bits[fl_idx] <= 1'b0;
                        fl_idx             <= fl_idx + 1'b1;
                        if (fl_idx == IW'(LINES - 1))
                            state <= S_IDLE;
                    end
                end
                S_FL_WB: begin
                    if (mem_ack) begin
                        dirty_bits[fl_idx] <= 1'b0;
                        state              <= S_FL_CHK;
                    end
                end
            endcase
        end
    end
endmodule
