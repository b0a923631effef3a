// Four-floor elevator controller. Calls are latched; the car keeps its direction while
// calls remain ahead (collective control), stops at called floors, and cycles the door.
// A door blocked while closing reopens it; MAX_REOPEN reopenings at one stop raise an
// alarm until the doorway stays clear. An emergency stop halts everything.
module elevator_4floor #(
    parameter int TRAVEL      = 6,  // cycles to move one floor (<= 8)
    parameter int DOOR_TIME   = 5,  // cycles the door stays open (<= 8)
    parameter int CLOSE_TIME  = 3,  // cycles to close the door (<= 8)
    parameter int MAX_REOPEN  = 3,
    parameter int FAULT_CLEAR = 8   // clear cycles needed to leave the fault (<= 8)
) (
    input  logic       clk,
    input  logic       rst_n,
    input  logic [3:0] call,
    input  logic       door_block,
    input  logic       estop,
    output logic [1:0] floor,
    output logic       moving,
    output logic       dir_up,
    output logic       door_open,
    output logic [3:0] pending,
    output logic       alarm
);
    typedef enum logic [2:0] {
        S_IDLE  = 3'd0,
        S_UP    = 3'd1,
        S_DOWN  = 3'd2,
        S_OPEN  = 3'd3,
        S_CLOSE = 3'd4,
        S_FAULT = 3'd5,
        S_ESTOP = 3'd6
    } state_t;

    state_t     state;
    logic [2:0] timer;
    logic [1:0] reopen;
    logic [3:0] here;
    logic       any_above, any_below;
    logic [1:0] nfloor;

    assign here   = 4'b0001 << floor;
    assign nfloor = (state == S_UP) ? floor + 2'd1 : floor - 2'd1;

    always_comb begin
        case (floor)
            2'd0:    begin any_above = |pending[3:1]; any_below = 1'b0;          end
            2'd1:    begin any_above = |pending[3:2]; any_below = pending[0];    end
            2'd2:    begin any_above = pending[3];    any_below = |pending[1:0]; end
            default: begin any_above = 1'b0;          any_below = |pending[2:0]; end
        endcase
    end

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            state   <= S_IDLE;
            {floor, timer, reopen, pending} <= '0;
            dir_up  <= 1'b1;
        end else begin
            pending <= pending | call;
            timer   <= timer + 3'd1;
            if (estop) begin
                state <= S_ESTOP;
            end else begin
                case (state)
                    S_IDLE: begin
                        timer <= '0;
                        if (pending[floor]) begin
                            state <= S_OPEN;
                        end else if (any_above) begin
                            dir_up <= 1'b1;
                            state  <= S_UP;
                        end else if (any_below) begin
                            dir_up <= 1'b0;
                            state  <= S_DOWN;
                        end
                    end
                    S_UP, S_DOWN: begin
                        if (timer == 3'(TRAVEL - 1)) begin
                            floor <= nfloor;
                            timer <= '0;
                            if (pending[nfloor]) state <= S_OPEN;
                        end
                    end
                    S_OPEN: begin
                        pending <= (pending | call) & ~here;
                        if (call[floor]) timer <= '0;
                        else if (timer == 3'(DOOR_TIME - 1)) begin
                            timer <= '0;
                            state <= S_CLOSE;
                        end
                    end
                    S_CLOSE: begin
                        if (door_block) begin
                            timer <= '0;
                            if (reopen == 2'(MAX_REOPEN - 1)) begin
                                state <= S_FAULT;
                            end else begin
                                reopen <= reopen + 2'd1;
                                state  <= S_OPEN;
                            end
                        end else if (timer == 3'(CLOSE_TIME - 1)) begin
                            reopen <= '0;
                            timer  <= '0;
                            if (dir_up && any_above)      state <= S_UP;
                            else if (any_below)           begin dir_up <= 1'b0; state <= S_DOWN; end
                            else if (any_above)           begin dir_up <= 1'b1; state <= S_UP; end
                            else                          state <= S_IDLE;
                        end
                    end
                    S_FAULT: begin
                        if (door_block) timer <= '0;
                        else if (timer == 3'(FAULT_CLEAR - 1)) begin
                            reopen <= '0;
                            timer  <= '0;
                            state  <= S_CLOSE;
                        end
                    end
                    S_ESTOP: begin
                        timer <= '0;
                        state <= S_CLOSE;
                    end
                    default: state <= S_IDLE;
                endcase
            end
        end
    end

    assign moving    = (state == S_UP) || (state == S_DOWN);
    assign door_open = (state == S_OPEN) || (state == S_FAULT);
    assign alarm     = (state == S_FAULT) || (state == S_ESTOP);
endmodule
