// SPI master, mode 0 (clock idles low, data sampled on the rising edge and changed on the
// falling edge), 8-bit transfers, MSB or LSB first. A start request pending at the end of
// a byte continues the burst (up to MAX_BURST bytes) without releasing chip select.
// Optionally the master first waits for the slave to signal ready by driving miso high.
module spi_master_mode0 #(
    parameter int HALF_PERIOD = 2,  // clk cycles per SCLK half period (2..4)
    parameter int CS_GAP      = 3,  // minimum cycles with cs_n high between bursts (<= 4)
    parameter int MAX_BURST   = 8,  // bytes per chip-select assertion (<= 8)
    parameter int RDY_TIMEOUT = 24  // cycles to wait for miso high (<= 32)
) (
    input  logic       clk,
    input  logic       rst_n,
    input  logic       start,
    input  logic [7:0] tx_byte,
    input  logic       lsb_first,
    input  logic       wait_ready,
    input  logic       miso,
    output logic       sclk,
    output logic       mosi,
    output logic       cs_n,
    output logic [7:0] rx_byte,
    output logic       done,
    output logic       rdy_timeout,
    output logic       busy
);
    typedef enum logic [2:0] {
        S_IDLE  = 3'd0,
        S_LEAD  = 3'd1,
        S_LOW   = 3'd2,
        S_HIGH  = 3'd3,
        S_TRAIL = 3'd4,
        S_GAP   = 3'd5,
        S_WAIT  = 3'd6
    } state_t;

    state_t     state;
    logic [1:0] cnt;
    logic [2:0] bit_cnt;
    logic [2:0] byte_cnt;
    logic [4:0] wait_cnt;
    logic [7:0] tx_sh, rx_sh;
    logic       lsb;
    logic       tick;

    assign tick = (cnt == 2'(HALF_PERIOD - 1));
    assign mosi = lsb ? tx_sh[0] : tx_sh[7];

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            state <= S_IDLE;
            {cnt, bit_cnt, byte_cnt, wait_cnt, tx_sh, rx_sh, lsb, rx_byte, done, rdy_timeout} <= '0;
            sclk <= 1'b0;
            cs_n <= 1'b1;
        end else begin
            done        <= 1'b0;
            rdy_timeout <= 1'b0;
            cnt  <= tick ? 2'd0 : cnt + 2'd1;
            case (state)
                S_IDLE: begin
                    cnt <= '0;
                    if (start) begin
                        tx_sh   <= tx_byte;
                        lsb     <= lsb_first;
                        bit_cnt  <= '0;
                        byte_cnt <= '0;
                        wait_cnt <= '0;
                        cs_n     <= 1'b0;
                        state    <= wait_ready ? S_WAIT : S_LEAD;
                    end
                end
                S_WAIT: begin
                    wait_cnt <= wait_cnt + 5'd1;
                    if (miso) begin
                        cnt   <= '0;
                        state <= S_LEAD;
                    end else if (wait_cnt == 5'(RDY_TIMEOUT - 1)) begin
                        rdy_timeout <= 1'b1;
                        cs_n        <= 1'b1;
                        cnt         <= '0;
                        state       <= S_GAP;
                    end
                end
                S_LEAD: if (tick) state <= S_LOW;
                S_LOW: begin
                    if (tick) begin
                        sclk  <= 1'b1;
                        rx_sh <= lsb ? {miso, rx_sh[7:1]} : {rx_sh[6:0], miso};
                        state <= S_HIGH;
                    end
                end
                S_HIGH: begin
                    if (tick) begin
                        sclk    <= 1'b0;
                        bit_cnt <= bit_cnt + 3'd1;
                        if (bit_cnt == 3'd7) begin
                            rx_byte <= rx_sh;
                            done    <= 1'b1;
                            if (start && byte_cnt != 3'(MAX_BURST - 1)) begin
                                tx_sh    <= tx_byte;
                                lsb      <= lsb_first;
                                byte_cnt <= byte_cnt + 3'd1;
                                state    <= S_LOW;
                            end else begin
                                state <= S_TRAIL;
                            end
                        end else begin
                            tx_sh <= lsb ? {1'b0, tx_sh[7:1]} : {tx_sh[6:0], 1'b0};
                            state <= S_LOW;
                        end
                    end
                end
                S_TRAIL: begin
                    if (tick) begin
                        cs_n  <= 1'b1;
                        state <= S_GAP;
                    end
                end
                S_GAP: begin
                    cnt <= cnt + 2'd1;
                    if (cnt == 2'(CS_GAP - 1)) state <= S_IDLE;
                end
                default: state <= S_IDLE;
            endcase
        end
    end

    assign busy = (state != S_IDLE);
endmodule
