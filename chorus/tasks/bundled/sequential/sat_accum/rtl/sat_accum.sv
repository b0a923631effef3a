// Signed saturating accumulator: adds or subtracts 8-bit signed samples into a
// 12-bit signed accumulator that clamps at its limits, with a sticky overflow
// flag and a saturating sample counter.
module sat_accum (
    input  logic              clk,
    input  logic              rst_n,
    input  logic              clear,
    input  logic              valid,
    input  logic              sub,
    input  logic signed [7:0] data_in,
    input  logic              clear_ovf,
    output logic signed [11:0] acc,
    output logic              at_max,
    output logic              at_min,
    output logic              ovf_sticky,
    output logic [1:0]        last_sat,
    output logic [5:0]        samples
);
    localparam logic signed [12:0] MAX_V = 13'sd2047;
    localparam logic signed [12:0] MIN_V = -13'sd2048;

    logic signed [12:0] operand, sum;
    logic               over, under;

    assign operand = sub ? -13'(data_in) : 13'(data_in);
    assign sum     = 13'(acc) + operand;
    assign over    = (sum > MAX_V);
    assign under   = (sum < MIN_V);

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            acc        <= '0;
            ovf_sticky <= 1'b0;
            last_sat   <= 2'b00;
            samples    <= '0;
        end else begin
            if (clear_ovf)
                ovf_sticky <= 1'b0;
            if (clear) begin
                acc      <= '0;
                samples  <= '0;
                last_sat <= 2'b00;
            end else if (valid) begin
                if (samples != 6'h3F)
                    samples <= samples + 1'b1;
                if (over) begin
                    acc        <= MAX_V[11:0];
                    ovf_sticky <= 1'b1;
                    last_sat   <= 2'b01;
                end else if (under) begin
                    acc        <= MIN_V[11:0];
                    ovf_sticky <= 1'b1;
                    last_sat   <= 2'b10;
                end else begin
                    acc      <= sum[11:0];
                    last_sat <= 2'b00;
                end
            end
        end
    end

    assign at_max = (acc == MAX_V[11:0]);
    assign at_min = (acc == MIN_V[11:0]);
endmodule
