// UART receiver: 8 data bits LSB first, optional even/odd parity, one stop bit.
// Samples the middle of each bit, rejects short start glitches, reports parity and
// framing errors, overrun of the receive register and a break (line held low).
module uart_rx_check #(
    parameter int CLKS_PER_BIT = 8,  // power of two, at least 4
    parameter int BREAK_BITS   = 8   // extra low bit times after a framing error
) (
    input  logic       clk,
    input  logic       rst_n,
    input  logic       rx,
    input  logic       parity_en,
    input  logic       parity_odd,
    input  logic       rd,
    output logic [7:0] rx_data,
    output logic       data_ready,
    output logic       parity_err,
    output logic       frame_err,
    output logic       overrun,
    output logic       glitch,
    output logic       break_det
);
    localparam int CW = $clog2(CLKS_PER_BIT);
    localparam int BREAK_CYCLES = BREAK_BITS * CLKS_PER_BIT;

    typedef enum logic [2:0] {
        S_IDLE    = 3'd0,
        S_START   = 3'd1,
        S_DATA    = 3'd2,
        S_PARITY  = 3'd3,
        S_STOP    = 3'd4,
        S_RECOVER = 3'd5,
        S_BREAK   = 3'd6
    } state_t;

    state_t        state;
    logic          rx_meta, rx_s;
    logic [CW-1:0] cnt;
    logic [2:0]    bit_idx;
    logic [7:0]    shreg;
    logic          ones_par, cfg_par, cfg_odd, par_bad;
    logic [5:0]    low_cnt;

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            rx_meta <= 1'b1;
            rx_s    <= 1'b1;
        end else begin
            rx_meta <= rx;
            rx_s    <= rx_meta;
        end
    end

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            state <= S_IDLE;
            {cnt, bit_idx, shreg, ones_par, cfg_par, cfg_odd, par_bad, low_cnt} <= '0;
            {rx_data, data_ready, parity_err, frame_err, overrun, glitch} <= '0;
        end else begin
            glitch <= 1'b0;
            cnt    <= cnt + 1'b1;
            if (rd) begin
                data_ready <= 1'b0;
                overrun    <= 1'b0;
            end
            case (state)
                S_IDLE: begin
                    cnt <= '0;
                    if (!rx_s) begin
                        cfg_par <= parity_en;
                        cfg_odd <= parity_odd;
                        state   <= S_START;
                    end
                end
                S_START: begin
                    if (cnt == CW'(CLKS_PER_BIT / 2 - 1)) begin
                        cnt <= '0;
                        if (rx_s) begin
                            glitch <= 1'b1;
                            state  <= S_IDLE;
                        end else begin
                            bit_idx  <= '0;
                            ones_par <= 1'b0;
                            state    <= S_DATA;
                        end
                    end
                end
                S_DATA: begin
                    if (cnt == CW'(CLKS_PER_BIT - 1)) begin
                        shreg    <= {rx_s, shreg[7:1]};
                        ones_par <= ones_par ^ rx_s;
                        bit_idx  <= bit_idx + 1'b1;
                        if (bit_idx == 3'd7) state <= cfg_par ? S_PARITY : S_STOP;
                    end
                end
                S_PARITY: begin
                    if (cnt == CW'(CLKS_PER_BIT - 1)) begin
                        par_bad <= (ones_par ^ rx_s) != cfg_odd;
                        state   <= S_STOP;
                    end
                end
                S_STOP: begin
                    if (cnt == CW'(CLKS_PER_BIT - 1)) begin
                        if (rx_s) begin
                            rx_data    <= shreg;
                            data_ready <= 1'b1;
                            overrun    <= data_ready && !rd;
                            parity_err <= cfg_par && par_bad;
                            frame_err  <= 1'b0;
                            state      <= S_IDLE;
                        end else begin
                            frame_err <= 1'b1;
                            low_cnt   <= '0;
                            state     <= S_RECOVER;
                        end
                        par_bad <= 1'b0;
                    end
                end
                S_RECOVER: begin
                    low_cnt <= low_cnt + 1'b1;
                    if (rx_s) begin
                        state <= S_IDLE;
                    end else if (low_cnt == 6'(BREAK_CYCLES - 1)) begin
                        state <= S_BREAK;
                    end
                end
                S_BREAK: begin
                    if (rx_s) state <= S_IDLE;
                end
                default: state <= S_IDLE;
            endcase
        end
    end

    assign break_det = (state == S_BREAK);
endmodule
