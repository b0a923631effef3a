// Traffic-light controller with a latched pedestrian request and an
// emergency override. light: 0 = red, 1 = yellow, 2 = green.
module traffic_light #(
    parameter int GREEN_CYCLES  = 8,
    parameter int YELLOW_CYCLES = 3,
    parameter int RED_CYCLES    = 2,
    parameter int WALK_CYCLES   = 5
) (
    input  logic       clk,
    input  logic       rst_n,
    input  logic       ped_req,
    input  logic       emergency,
    output logic [1:0] light,
    output logic       walk,
    output logic [1:0] state
);
    localparam logic [1:0] S_GREEN  = 2'd0;
    localparam logic [1:0] S_YELLOW = 2'd1;
    localparam logic [1:0] S_RED    = 2'd2;
    localparam logic [1:0] S_WALK   = 2'd3;

    localparam logic [1:0] L_RED    = 2'd0;
    localparam logic [1:0] L_YELLOW = 2'd1;
    localparam logic [1:0] L_GREEN  = 2'd2;

    localparam int MAXC = (GREEN_CYCLES > WALK_CYCLES) ? GREEN_CYCLES : WALK_CYCLES;
    localparam int TW   = (MAXC > 2) ? $clog2(MAXC) : 1;

    localparam logic [TW-1:0] T_GREEN  = TW'(GREEN_CYCLES - 1);
    localparam logic [TW-1:0] T_YELLOW = TW'(YELLOW_CYCLES - 1);
    localparam logic [TW-1:0] T_RED    = TW'(RED_CYCLES - 1);
    localparam logic [TW-1:0] T_WALK   = TW'(WALK_CYCLES - 1);

    logic [TW-1:0] timer;       // cycles left in this state, minus one
    logic          ped_pending; // ped_req seen, walk phase not yet started
    logic          expired;

    assign expired = (timer == '0);

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            state       <= S_GREEN;
            timer       <= T_GREEN;
            ped_pending <= 1'b0;
        end else begin
            if (ped_req) ped_pending <= 1'b1;
            timer <= timer - 1'b1;
            case (state)
                S_GREEN: begin
                    if (emergency || expired) begin
                        state <= S_YELLOW;
                        timer <= T_YELLOW;
                    end
                end
                S_YELLOW: begin
                    if (expired) begin
                        if (ped_pending && !emergency) begin
                            state       <= S_WALK;
                            timer       <= T_WALK;
                            ped_pending <= 1'b0;
                        end else begin
                            state <= S_RED;
                            timer <= T_RED;
                        end
                    end
                end
                S_RED: begin
                    if (emergency) begin
                        timer <= T_RED;             // hold red while emergency
                    end else if (expired) begin
                        state <= S_GREEN;
                        timer <= T_GREEN;
                    end
                end
                default: begin // S_WALK
                    if (emergency) begin
                        state <= S_RED;
                        timer <= T_RED;
                    end else if (expired) begin
                        state <= S_GREEN;
                        timer <= T_GREEN;
                    end
                end
            endcase
        end
    end

    always_comb begin
        case (state)
            S_GREEN:  light = L_GREEN;
            S_YELLOW: light = L_YELLOW;
            default:  light = L_RED;
        endcase
    end

    assign walk = (state == S_WALK);
endmodule
