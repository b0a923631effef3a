// Programmable clock divider (divide by 2..255) with 50% duty cycle for both
// even and odd ratios, bypass for ratios 0 and 1, and glitch-free ratio change.
module clk_div_n (
    input  logic       clk,
    input  logic       rst_n,
    input  logic       en,
    input  logic       div_we,
    input  logic [7:0] div_in,
    output logic       clk_out,
    output logic       bypass,
    output logic       odd_mode,
    output logic       sync_pulse,
    output logic [7:0] div_active
);
    logic [7:0] div_pending;
    logic [7:0] cnt;
    logic [7:0] half;    // ceil(N/2): cycles the output is high (rising-edge part)
    logic       pos_q;   // high phase aligned to the rising edge
    logic       neg_q;   // pos_q delayed by half a clock (odd ratios)
    logic       last;

    assign bypass   = (div_active < 8'd2);
    assign odd_mode = div_active[0] && !bypass;
    assign half     = (div_active >> 1) + {7'd0, div_active[0]};
    assign last     = (cnt == div_active - 1'b1) || bypass;

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            div_pending <= 8'd2;
            div_active  <= 8'd2;
            cnt         <= 8'd0;
            pos_q       <= 1'b0;
        end else begin
            if (div_we)
                div_pending <= div_in;
            if (!en) begin
                cnt        <= 8'd0;
                pos_q      <= 1'b0;
                div_active <= div_we ? div_in : div_pending;
            end else if (last) begin
                // new ratio takes effect only at the end of an output period
                cnt        <= 8'd0;
                div_active <= div_pending;
                pos_q      <= 1'b1;
            end else begin
                cnt   <= cnt + 1'b1;
                pos_q <= (cnt + 1'b1) < half;
            end
        end
    end

    always_ff @(negedge clk or negedge rst_n) begin
        if (!rst_n)
            neg_q <= 1'b0;
        else
            neg_q <= pos_q;
    end

    assign sync_pulse = en && (cnt == 8'd0) && !bypass;

    always_comb begin
        if (!en)
            clk_out = 1'b0;
        else if (bypass)
            clk_out = clk;
        else if (odd_mode)
            clk_out = pos_q & neg_q;
        else
            clk_out = pos_q;
    end
endmodule
