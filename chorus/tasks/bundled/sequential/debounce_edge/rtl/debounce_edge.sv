// Debouncer with a two-flop synchroniser, programmable stable-count threshold,
// rise/fall edge pulses and a saturating counter of rejected glitches.
module debounce_edge #(
    parameter logic [7:0] DEFAULT_THRESH = 8'd200
) (
    input  logic       clk,
    input  logic       rst_n,
    input  logic       noisy_in,
    input  logic       thresh_we,
    input  logic [7:0] thresh_in,
    input  logic       glitch_clear,
    output logic       clean,
    output logic       rise,
    output logic       fall,
    output logic [7:0] stable_cnt,
    output logic [3:0] glitch_cnt,
    output logic       glitch_sat
);
    logic       sync1, sync2;
    logic [7:0] thresh_reg;
    logic       differs;

    assign differs    = (sync2 != clean);
    assign glitch_sat = (glitch_cnt == 4'hF);

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            sync1 <= 1'b0;
            sync2 <= 1'b0;
        end else begin
            sync1 <= noisy_in;
            sync2 <= sync1;
        end
    end

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n)
            thresh_reg <= DEFAULT_THRESH;
        else if (thresh_we)
            thresh_reg <= thresh_in;
    end

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            clean      <= 1'b0;
            rise       <= 1'b0;
            fall       <= 1'b0;
            stable_cnt <= 8'd0;
            glitch_cnt <= 4'd0;
        end else begin
            rise <= 1'b0;
            fall <= 1'b0;
            if (differs) begin
                if (stable_cnt >= thresh_reg) begin
                    // input held its new level long enough: accept it
                    clean      <= sync2;
                    rise       <= sync2;
                    fall       <= !sync2;
                    stable_cnt <= 8'd0;
                end else begin
                    stable_cnt <= stable_cnt + 1'b1;
                end
            end else if (stable_cnt != 8'd0) begin
                // input returned to the old level before the threshold
                stable_cnt <= 8'd0;
                if (!glitch_sat)
                    glitch_cnt <= glitch_cnt + 1'b1;
            end
            if (glitch_clear)
                glitch_cnt <= 4'd0;
        end
    end
endmodule
