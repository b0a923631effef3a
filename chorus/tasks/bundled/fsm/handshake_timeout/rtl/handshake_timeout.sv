// Valid/ready source controller: offers one word per request, times out when the sink
// stalls, backs off and retries a bounded number of times before declaring failure.
module handshake_timeout #(
    parameter int DW      = 8,
    parameter int TIMEOUT = 12,  // cycles valid may wait for ready in one attempt
    parameter int RETRIES = 2,   // retries after the first attempt
    parameter int BACKOFF = 3    // idle cycles between attempts
) (
    input  logic          clk,
    input  logic          rst_n,
    input  logic          start,
    input  logic [DW-1:0] data_in,
    input  logic          ready,
    input  logic          cancel,
    input  logic          clear,
    output logic          valid,
    output logic [DW-1:0] data_out,
    output logic          busy,
    output logic          done,
    output logic          timeout_err,
    output logic          failed,
    output logic [1:0]    retry_count
);
    typedef enum logic [2:0] {
        S_IDLE    = 3'd0,
        S_SEND    = 3'd1,
        S_BACKOFF = 3'd2,
        S_DONE    = 3'd3,
        S_FAIL    = 3'd4
    } state_t;

    state_t     state;
    logic [3:0] timer;
    logic [1:0] retries;

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            state       <= S_IDLE;
            timer       <= '0;
            retries     <= '0;
            data_out    <= '0;
            timeout_err <= 1'b0;
        end else begin
            timeout_err <= 1'b0;
            case (state)
                S_IDLE: begin
                    if (start) begin
                        data_out <= data_in;
                        timer    <= '0;
                        retries  <= '0;
                        state    <= S_SEND;
                    end
                end
                S_SEND: begin
                    if (cancel) begin
                        state <= S_IDLE;
                    end else if (ready) begin
                        state <= S_DONE;
                    end else if (timer == 4'(TIMEOUT - 1)) begin
                        timeout_err <= 1'b1;
                        timer       <= '0;
                        if (retries == 2'(RETRIES)) begin
                            state <= S_FAIL;
                        end else begin
                            retries <= retries + 1'b1;
                            state   <= S_BACKOFF;
                        end
                    end else begin
                        timer <= timer + 1'b1;
                    end
                end
                S_BACKOFF: begin
                    if (cancel) begin
                        state <= S_IDLE;
                        timer <= '0;
                    end else if (timer == 4'(BACKOFF - 1)) begin
                        timer <= '0;
                        state <= S_SEND;
                    end else begin
                        timer <= timer + 1'b1;
                    end
                end
                S_DONE: begin
                    state <= S_IDLE;
                end
                S_FAIL: begin
                    if (clear) state <= S_IDLE;
                end
                default: state <= S_IDLE;
            endcase
        end
    end

    assign valid       = (state == S_SEND);
    assign busy        = (state == S_SEND) || (state == S_BACKOFF);
    assign done        = (state == S_DONE);
    assign failed      = (state == S_FAIL);
    assign retry_count = retries;
endmodule
