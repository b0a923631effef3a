// 8N1 UART receiver: idle-high line, one start bit (0), 8 data bits LSB
// first, one stop bit (1). `rx` passes through a 2-flop synchronizer.
`include "uart_defs.svh"

module uart_rx #(
    parameter int CLKS_PER_BIT = 16
) (
    input  logic                       clk,
    input  logic                       rst,
    input  logic                       rx,
    output logic [`UART_DATA_BITS-1:0] data_out,
    output logic                       valid,
    output logic                       frame_error
);
    localparam int BW = $clog2(`UART_DATA_BITS);
    localparam logic [BW-1:0] LAST_BIT = BW'(`UART_DATA_BITS - 1);

    logic [1:0]                 rx_sync;
    logic                       rx_s;
    logic [1:0]                 state;
    logic [BW-1:0]              bit_idx;
    logic [`UART_DATA_BITS-1:0] shift;
    logic                       half_tick, bit_tick, clear;

    assign rx_s = rx_sync[1];

    // Hold the bit timer at 0 while idle; restart it at the middle of the
    // start bit so that every later bit_tick lands mid-bit.
    assign clear = (state == `UART_ST_IDLE) ||
                   (state == `UART_ST_START && half_tick);

    baud_counter #(.CLKS_PER_BIT(CLKS_PER_BIT)) u_baud (
        .clk       (clk),
        .rst       (rst),
        .clear     (clear),
        .half_tick (half_tick),
        .bit_tick  (bit_tick)
    );

    always_ff @(posedge clk) begin
        if (rst) begin
            rx_sync     <= 2'b11;
            state       <= `UART_ST_IDLE;
            bit_idx     <= '0;
            shift       <= '0;
            data_out    <= '0;
            valid       <= 1'b0;
            frame_error <= 1'b0;
        end else begin
            rx_sync     <= {rx_sync[0], rx};
            valid       <= 1'b0;
            frame_error <= 1'b0;
            case (state)
                `UART_ST_IDLE: begin
                    bit_idx <= '0;
                    if (!rx_s) state <= `UART_ST_START;
                end
                `UART_ST_START: begin
                    if (half_tick) begin
                        // Line back high at mid start bit: a glitch, not a frame.
                        state <= rx_s ? `UART_ST_IDLE : `UART_ST_DATA;
                    end
                end
                `UART_ST_DATA: begin
                    if (bit_tick) begin
                        shift   <= {rx_s, shift[`UART_DATA_BITS-1:1]};
                        bit_idx <= bit_idx + 1'b1;
                        if (bit_idx == LAST_BIT) state <= `UART_ST_STOP;
                    end
                end
                default: begin // `UART_ST_STOP
                    if (bit_tick) begin
                        if (rx_s) begin
                            data_out <= shift;
                            valid    <= 1'b1;
                        end else begin
                            frame_error <= 1'b1;
                        end
                        state <= `UART_ST_IDLE;
                    end
                end
            endcase
        end
    end
endmodule
