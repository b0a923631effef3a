// Windowed watchdog timer with keyed kicks, configuration lock, a half-way
// warning, a stretched reset output, a latched cause and a reset counter.
module watchdog_lock #(
    parameter logic [7:0] KICK_KEY = 8'h5A
) (
    input  logic       clk,
    input  logic       rst_n,
    input  logic       cfg_we,
    input  logic       cfg_enable,
    input  logic [7:0] cfg_timeout,
    input  logic [7:0] cfg_window,
    input  logic       lock,
    input  logic       kick,
    input  logic [7:0] kick_key,
    output logic       enabled,
    output logic       locked,
    output logic       cfg_err,
    output logic [7:0] count,
    output logic       warn,
    output logic       wdt_reset,
    output logic [1:0] cause,
    output logic [1:0] bite_cnt
);
    localparam logic [1:0] C_NONE = 2'd0, C_TIMEOUT = 2'd1, C_BADKEY = 2'd2, C_EARLY = 2'd3;

    logic [7:0] timeout_reg, window_reg;
    logic [1:0] psc;
    logic [1:0] hold;
    logic       tick, bite;
    logic [1:0] bite_cause;

    assign tick      = enabled && (psc == 2'd3);
    assign warn      = enabled && (count >= {1'b0, timeout_reg[7:1]});
    assign wdt_reset = (hold != 2'd0);

    // Decide whether this cycle ends in a bite, and why.
    always_comb begin
        bite       = 1'b0;
        bite_cause = C_NONE;
        if (enabled && !wdt_reset) begin
            if (kick && kick_key != KICK_KEY) begin
                bite = 1'b1; bite_cause = C_BADKEY;
            end else if (kick && count < window_reg) begin
                bite = 1'b1; bite_cause = C_EARLY;
            end else if (!kick && tick && count == timeout_reg) begin
                bite = 1'b1; bite_cause = C_TIMEOUT;
            end
        end
    end

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            timeout_reg <= 8'd200;
            window_reg  <= 8'd0;
            enabled     <= 1'b0;
            locked      <= 1'b0;
            cfg_err     <= 1'b0;
        end else begin
            if (lock && enabled)
                locked <= 1'b1;
            if (cfg_we) begin
                if (locked) begin
                    cfg_err <= 1'b1;
                end else begin
                    enabled     <= cfg_enable;
                    timeout_reg <= cfg_timeout;
                    window_reg  <= cfg_window;
                end
            end
        end
    end

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            count    <= 8'd0;
            psc      <= 2'd0;
            hold     <= 2'd0;
            cause    <= C_NONE;
            bite_cnt <= 2'd0;
        end else begin
            if (hold != 2'd0)
                hold <= hold - 1'b1;
            if (!enabled || bite || (kick && !wdt_reset)) begin
                count <= 8'd0;
                psc   <= 2'd0;
            end else begin
                psc <= psc + 1'b1;
                if (tick)
                    count <= count + 1'b1;
            end
            if (bite) begin
                hold  <= 2'd3;
                cause <= bite_cause;
                if (bite_cnt != 2'd3)
                    bite_cnt <= bite_cnt + 1'b1;
            end
        end
    end
endmodule
