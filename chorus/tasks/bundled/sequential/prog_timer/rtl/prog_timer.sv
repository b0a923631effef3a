// Programmable down-counting timer with prescaler, one-shot / periodic mode,
// sticky interrupt flag, interrupt-overrun detection and a config-error flag.
module prog_timer (
    input  logic       clk,
    input  logic       rst_n,
    input  logic       cfg_we,
    input  logic [7:0] cfg_load,
    input  logic [3:0] cfg_prescale,
    input  logic       cfg_periodic,
    input  logic       start,
    input  logic       stop,
    input  logic       irq_clear,
    output logic [7:0] count,
    output logic       running,
    output logic       tick,
    output logic       expired,
    output logic       irq,
    output logic       irq_overrun,
    output logic       cfg_err
);
    logic [7:0] load_reg;
    logic [3:0] psc_reg;
    logic       periodic_reg;
    logic [3:0] psc_cnt;

    assign tick = running && (psc_cnt == psc_reg);
    assign expired = tick && (count == 8'd0);

    // Configuration registers: writes are refused while the timer runs.
    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            load_reg     <= 8'd0;
            psc_reg      <= 4'd0;
            periodic_reg <= 1'b0;
            cfg_err      <= 1'b0;
        end else if (cfg_we) begin
            if (running) begin
                cfg_err <= 1'b1;
            end else begin
                load_reg     <= cfg_load;
                psc_reg      <= cfg_prescale;
                periodic_reg <= cfg_periodic;
                cfg_err      <= 1'b0;
            end
        end
    end

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            count   <= 8'd0;
            psc_cnt <= 4'd0;
            running <= 1'b0;
        end else if (stop) begin
            running <= 1'b0;
            psc_cnt <= 4'd0;
        end else if (start && !running) begin
            running <= 1'b1;
            count   <= load_reg;
            psc_cnt <= 4'd0;
        end else if (running) begin
            if (!tick) begin
                psc_cnt <= psc_cnt + 1'b1;
            end else begin
                psc_cnt <= 4'd0;
                if (count != 8'd0)
                    count <= count - 1'b1;
                else if (periodic_reg)
                    count <= load_reg;
                else
                    running <= 1'b0;
            end
        end
    end

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            irq         <= 1'b0;
            irq_overrun <= 1'b0;
        end else if (expired) begin
            irq <= 1'b1;
            if (irq && !irq_clear)
                irq_overrun <= 1'b1;
        end else if (irq_clear) begin
            irq         <= 1'b0;
            irq_overrun <= 1'b0;
        end
    end
endmodule
