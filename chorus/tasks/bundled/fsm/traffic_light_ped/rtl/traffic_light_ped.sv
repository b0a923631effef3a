// Two-road traffic-light controller with a pedestrian phase and an emergency override.
// Main road rests on green; side-road cars and pedestrians are served after a minimum
// main green. Light codes: 0 = red, 1 = yellow, 2 = green.
module traffic_light_ped #(
    parameter int MIN_GREEN  = 10,
    parameter int YELLOW     = 3,
    parameter int ALL_RED    = 2,
    parameter int SIDE_MIN   = 5,
    parameter int SIDE_MAX   = 12,
    parameter int WALK       = 6,
    parameter int WALK_FLASH = 4
) (
    input  logic       clk,
    input  logic       rst_n,
    input  logic       side_car,
    input  logic       ped_req,
    input  logic       emergency,
    output logic [1:0] main_light,
    output logic [1:0] side_light,
    output logic       walk,
    output logic       walk_flash,
    output logic       ped_wait
);
    localparam logic [1:0] RED = 2'd0, YEL = 2'd1, GRN = 2'd2;

    typedef enum logic [3:0] {
        S_MAIN_G  = 4'd0,
        S_MAIN_Y  = 4'd1,
        S_RED_A   = 4'd2,
        S_SIDE_G  = 4'd3,
        S_SIDE_Y  = 4'd4,
        S_RED_B   = 4'd5,
        S_WALK    = 4'd6,
        S_FLASH   = 4'd7,
        S_EMERG   = 4'd8
    } state_t;

    state_t     state, next;
    logic [3:0] timer;
    logic       ped_pend;
    logic       leave;

    always_comb begin
        next = state;
        case (state)
            S_MAIN_G: if (timer >= 4'(MIN_GREEN - 1) && (side_car || ped_pend)) next = S_MAIN_Y;
            S_MAIN_Y: if (timer == 4'(YELLOW - 1)) next = S_RED_A;
            S_RED_A:  if (timer == 4'(ALL_RED - 1)) next = ped_pend ? S_WALK : S_SIDE_G;
            S_WALK:   if (timer == 4'(WALK - 1)) next = S_FLASH;
            S_FLASH:  if (timer == 4'(WALK_FLASH - 1)) next = side_car ? S_SIDE_G : S_RED_B;
            S_SIDE_G: if ((timer >= 4'(SIDE_MIN - 1) && !side_car) || timer == 4'(SIDE_MAX - 1))
                          next = S_SIDE_Y;
            S_SIDE_Y: if (timer == 4'(YELLOW - 1)) next = S_RED_B;
            S_RED_B:  if (timer == 4'(ALL_RED - 1)) next = S_MAIN_G;
            S_EMERG:  if (!emergency) next = S_RED_B;
            default:  next = S_RED_B;
        endcase
        if (emergency) next = S_EMERG;
    end

    assign leave = (next != state);

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            state    <= S_RED_B;
            timer    <= '0;
            ped_pend <= 1'b0;
        end else begin
            state <= next;
            if (leave) timer <= '0;
            else if (timer != 4'hF) timer <= timer + 1'b1;
            if (state == S_WALK) ped_pend <= 1'b0;
            else if (ped_req)    ped_pend <= 1'b1;
        end
    end

    always_comb begin
        main_light = RED;
        side_light = RED;
        case (state)
            S_MAIN_G: main_light = GRN;
            S_MAIN_Y: main_light = YEL;
            S_SIDE_G: side_light = GRN;
            S_SIDE_Y: side_light = YEL;
            default: ;
        endcase
    end

    assign walk       = (state == S_WALK) || (state == S_FLASH);
    assign walk_flash = (state == S_FLASH);
    assign ped_wait   = ped_pend;
endmodule
