// Bit-timing counter for uart_rx. Counts clock cycles from 0 to
// CLKS_PER_BIT-1 and wraps. `clear` forces the count back to 0.
// half_tick is high when the count is CLKS_PER_BIT/2-1 (middle of a bit
// measured from a falling edge), bit_tick when it is CLKS_PER_BIT-1.
module baud_counter #(
    parameter int CLKS_PER_BIT = 16
) (
    input  logic clk,
    input  logic rst,
    input  logic clear,
    output logic half_tick,
    output logic bit_tick
);
    localparam int CW = (CLKS_PER_BIT > 2) ? $clog2(CLKS_PER_BIT) : 1;
    localparam logic [CW-1:0] LAST = CW'(CLKS_PER_BIT - 1);
    localparam logic [CW-1:0] HALF = CW'(CLKS_PER_BIT / 2 - 1);

    logic [CW-1:0] cnt;

    assign bit_tick  = (cnt == LAST);
    assign half_tick = (cnt == HALF);

    always_ff @(posedge clk) begin
        if (rst || clear) cnt <= '0;
        else if (bit_tick) cnt <= '0;
        else cnt <= cnt + 1'b1;
    end
endmodule
