// UART transmitter: start bit, 8 data bits LSB first, optional even/odd parity bit,
// one or two stop bits. Each bit lasts CLKS_PER_BIT clock cycles. With stuffing enabled,
// the flag (7E) and escape (7D) bytes go out as the escape byte then the byte XOR 20.
module uart_tx_parity #(
    parameter int CLKS_PER_BIT = 4
) (
    input  logic       clk,
    input  logic       rst_n,
    input  logic       tx_start,
    input  logic [7:0] tx_data,
    input  logic       parity_en,
    input  logic       parity_odd,
    input  logic       two_stop,
    input  logic       stuff_en,
    output logic       tx,
    output logic       busy,
    output logic       tx_done
);
    typedef enum logic [2:0] {
        S_IDLE   = 3'd0,
        S_START  = 3'd1,
        S_DATA   = 3'd2,
        S_PARITY = 3'd3,
        S_STOP1  = 3'd4,
        S_STOP2  = 3'd5
    } state_t;

    state_t     state;
    logic [1:0] baud;
    logic [2:0] bit_idx;
    logic [7:0] shreg;
    logic       par_bit;
    logic       cfg_par, cfg_odd, cfg_two;
    logic       bit_end;
    logic       stuff_pend;
    logic       stuff_flag;  // the pending stuffed byte was 7E (else 7D)
    logic       needs_stuff;

    assign bit_end     = (baud == 2'(CLKS_PER_BIT - 1));
    assign needs_stuff = stuff_en && (tx_data == 8'h7E || tx_data == 8'h7D);

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            state   <= S_IDLE;
            baud    <= '0;
            bit_idx <= '0;
            shreg   <= '0;
            par_bit <= 1'b0;
            cfg_par <= 1'b0;
            cfg_odd <= 1'b0;
            cfg_two <= 1'b0;
            tx      <= 1'b1;
            tx_done    <= 1'b0;
            stuff_pend <= 1'b0;
            stuff_flag <= 1'b0;
        end else begin
            tx_done <= 1'b0;
            baud    <= bit_end ? '0 : baud + 1'b1;
            case (state)
                S_IDLE: begin
                    baud <= '0;
                    tx   <= 1'b1;
                    if (tx_start) begin
                        if (needs_stuff) begin
                            shreg      <= 8'h7D;
                            par_bit    <= parity_odd;  // 7D has an even number of ones
                            stuff_pend <= 1'b1;
                            stuff_flag <= tx_data[0] == 1'b0;
                        end else begin
                            shreg   <= tx_data;
                            par_bit <= (^tx_data) ^ parity_odd;
                        end
                        cfg_par <= parity_en;
                        cfg_odd <= parity_odd;
                        cfg_two <= two_stop;
                        tx      <= 1'b0;
                        state   <= S_START;
                    end
                end
                S_START: begin
                    if (bit_end) begin
                        tx      <= shreg[0];
                        shreg   <= {1'b0, shreg[7:1]};
                        bit_idx <= '0;
                        state   <= S_DATA;
                    end
                end
                S_DATA: begin
                    if (bit_end) begin
                        if (bit_idx == 3'd7) begin
                            tx    <= cfg_par ? par_bit : 1'b1;
                            state <= cfg_par ? S_PARITY : S_STOP1;
                        end else begin
                            tx      <= shreg[0];
                            shreg   <= {1'b0, shreg[7:1]};
                            bit_idx <= bit_idx + 1'b1;
                        end
                    end
                end
                S_PARITY: begin
                    if (bit_end) begin
                        tx    <= 1'b1;
                        state <= S_STOP1;
                    end
                end
                S_STOP1: begin
                    if (bit_end) begin
                        if (cfg_two) begin
                            state <= S_STOP2;
                        end else if (stuff_pend) begin
                            tx         <= 1'b0;
                            shreg      <= stuff_flag ? 8'h5E : 8'h5D;
                            par_bit    <= ~cfg_odd;  // 5E and 5D both hold five ones
                            stuff_pend <= 1'b0;
                            state      <= S_START;
                        end else begin
                            tx_done <= 1'b1;
                            state   <= S_IDLE;
                        end
                    end
                end
                S_STOP2: begin
                    if (bit_end) begin
                        if (stuff_pend) begin
                            tx         <= 1'b0;
                            shreg      <= stuff_flag ? 8'h5E : 8'h5D;
                            par_bit    <= ~cfg_odd;  // 5E and 5D both hold five ones
                            stuff_pend <= 1'b0;
                            state      <= S_START;
                        end else begin
                            tx_done <= 1'b1;
                            state   <= S_IDLE;
                        end
                    end
                end
                default: state <= S_IDLE;
            endcase
        end
    end

    assign busy = (state != S_IDLE);
endmodule
