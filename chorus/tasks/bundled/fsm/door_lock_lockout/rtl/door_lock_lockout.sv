// Keypad door lock: a 4-digit code opens the door for OPEN_TIME cycles; MAX_FAILS wrong
// codes in a row lock the keypad out for LOCKOUT_TIME cycles. While open, the program
// key starts entry of a new 4-digit code. Keys: 0-9 digits, A clear, E program, F lock.
module door_lock_lockout #(
    parameter logic [15:0] CODE          = 16'h2580,  // first digit in [15:12]
    parameter int          MAX_FAILS     = 3,
    parameter int          ENTRY_TIMEOUT = 20,
    parameter int          OPEN_TIME     = 10,
    parameter int          LOCKOUT_TIME  = 40
) (
    input  logic       clk,
    input  logic       rst_n,
    input  logic       key_valid,
    input  logic [3:0] key,
    output logic       unlocked,
    output logic       lockout,
    output logic       error,
    output logic       timeout,
    output logic       programming,
    output logic [1:0] fail_count,
    output logic [1:0] digits
);
    typedef enum logic [3:0] {
        S_IDLE    = 4'd0,
        S_D1      = 4'd1,
        S_D2      = 4'd2,
        S_D3      = 4'd3,
        S_CHECK   = 4'd4,
        S_OPEN    = 4'd5,
        S_WRONG   = 4'd6,
        S_LOCKOUT = 4'd7,
        S_PROG    = 4'd8
    } state_t;

    localparam logic [3:0] K_CLEAR = 4'hA, K_PROG = 4'hE, K_LOCK = 4'hF;

    state_t      state;
    logic [15:0] code;
    logic [11:0] new_code;  // digits entered so far while programming
    logic [5:0]  tmr;
    logic [1:0]  prog_cnt;
    logic        ok;
    logic        is_digit;
    logic [3:0]  expect_digit;

    assign is_digit = key_valid && (key <= 4'd9);

    always_comb begin
        case (state)
            S_IDLE:  expect_digit = code[15:12];
            S_D1:    expect_digit = code[11:8];
            S_D2:    expect_digit = code[7:4];
            default: expect_digit = code[3:0];
        endcase
    end

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            state <= S_IDLE;
            code  <= CODE;
            {new_code, tmr, prog_cnt, ok, fail_count, error, timeout} <= '0;
        end else begin
            error   <= 1'b0;
            timeout <= 1'b0;
            tmr     <= tmr + 1'b1;
            case (state)
                S_IDLE: begin
                    tmr <= '0;
                    ok  <= 1'b1;
                    if (is_digit) begin
                        ok    <= (key == expect_digit);
                        state <= S_D1;
                    end
                end
                S_D1, S_D2, S_D3: begin
                    if (key_valid && key == K_CLEAR) begin
                        state <= S_IDLE;
                    end else if (is_digit) begin
                        tmr   <= '0;
                        ok    <= ok && (key == expect_digit);
                        state <= (state == S_D3) ? S_CHECK : state_t'(state + 1'b1);
                    end else if (tmr == 6'(ENTRY_TIMEOUT - 1)) begin
                        timeout <= 1'b1;
                        state   <= S_IDLE;
                    end
                end
                S_CHECK: begin
                    tmr <= '0;
                    if (ok) begin
                        fail_count <= '0;
                        state      <= S_OPEN;
                    end else if (fail_count == 2'(MAX_FAILS - 1)) begin
                        fail_count <= '0;
                        state      <= S_LOCKOUT;
                    end else begin
                        fail_count <= fail_count + 1'b1;
                        error      <= 1'b1;
                        state      <= S_WRONG;
                    end
                end
                S_WRONG: begin
                    if (tmr == 6'd2) state <= S_IDLE;
                end
                S_OPEN: begin
                    if (key_valid && key == K_PROG) begin
                        prog_cnt <= '0;
                        state    <= S_PROG;
                    end else if ((key_valid && key == K_LOCK) || tmr == 6'(OPEN_TIME - 1)) begin
                        state <= S_IDLE;
                    end
                end
                S_LOCKOUT: begin
                    if (tmr == 6'(LOCKOUT_TIME - 1)) state <= S_IDLE;
                end
                S_PROG: begin
                    if (key_valid && key == K_CLEAR) begin
                        state <= S_IDLE;
                    end else if (is_digit) begin
                        new_code <= {new_code[7:0], key};
                        prog_cnt <= prog_cnt + 1'b1;
                        if (prog_cnt == 2'd3) begin
                            code  <= {new_code, key};
                            state <= S_IDLE;
                        end
                    end
                end
                default: state <= S_IDLE;
            endcase
        end
    end

    assign unlocked    = (state == S_OPEN) || (state == S_PROG);
    assign lockout     = (state == S_LOCKOUT);
    assign programming = (state == S_PROG);
    assign digits      = (state <= S_D3) ? 2'(state) : 2'd0;
endmodule
