// PWM generator with a small register interface: period and duty are
// double-buffered (applied at the end of a period), optional output inversion
// and a burst mode that stops after a programmed number of periods.
module pwm_gen (
    input  logic       clk,
    input  logic       rst_n,
    input  logic       wr_en,
    input  logic [1:0] addr,
    input  logic [7:0] wdata,
    output logic       pwm_out,
    output logic       period_end,
    output logic [7:0] cnt,
    output logic [7:0] periods_done,
    output logic       enabled,
    output logic       done
);
    localparam logic [1:0] A_PERIOD = 2'd0, A_DUTY = 2'd1, A_CTRL = 2'd2, A_BURST = 2'd3;

    logic [7:0] period_sh, duty_sh;    // written by software
    logic [7:0] period_act, duty_act;  // in use by the counter
    logic [7:0] burst_len;
    logic       invert;

    assign period_end = enabled && (cnt >= period_act);

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            period_sh    <= 8'd255;
            duty_sh      <= 8'd128;
            burst_len    <= 8'd0;
            invert       <= 1'b0;
            enabled      <= 1'b0;
            done         <= 1'b0;
            period_act   <= 8'd255;
            duty_act     <= 8'd128;
            cnt          <= 8'd0;
            periods_done <= 8'd0;
        end else begin
            if (!enabled) begin
                cnt          <= 8'd0;
                periods_done <= 8'd0;
                period_act   <= period_sh;
                duty_act     <= duty_sh;
            end else if (period_end) begin
                cnt          <= 8'd0;
                period_act   <= period_sh;
                duty_act     <= duty_sh;
                periods_done <= periods_done + 1'b1;
                if (burst_len != 8'd0 && periods_done + 1'b1 == burst_len) begin
                    enabled <= 1'b0;
                    done    <= 1'b1;
                end
            end else begin
                cnt <= cnt + 1'b1;
            end
            if (wr_en) begin
                case (addr)
                    A_PERIOD: period_sh <= wdata;
                    A_DUTY:   duty_sh   <= wdata;
                    A_CTRL: begin
                        enabled <= wdata[0];
                        invert  <= wdata[1];
                        if (wdata[0])
                            done <= 1'b0;
                    end
                    default:  burst_len <= wdata;
                endcase
            end
        end
    end

    // High for the first duty_act cycles of each period; idle level follows invert.
    always_comb begin
        if (!enabled)
            pwm_out = invert;
        else
            pwm_out = (cnt < duty_act) ^ invert;
    end
endmodule
