// One synchronized input bit: synchronizer, edge detector, a check for rising
// edges closer than MIN_GAP cycles and a detector for a level held high for
// HOLD cycles. BIT is the index of the input bit.
module sync_bit #(
    parameter int STAGES  = 3,
    parameter int MIN_GAP = 4,
    parameter int HOLD    = 10,
    parameter int BIT     = 0
) (
    input  logic clk,
    input  logic rst_n,
    input  logic clear,
    input  logic async_in,
    output logic level,
    output logic rise,
    output logic fall,
    output logic too_fast,
    output logic long_high
);
    localparam int GW = $clog2(MIN_GAP + 1);
    localparam int HW = $clog2(HOLD + 1);

    logic          prev;
    logic [GW-1:0] gap_cnt;
    logic [HW-1:0] high_cnt;

    sync_chain #(.STAGES(STAGES), .BIT(BIT)) u_sync (.clk(clk), .rst_n(rst_n), .d(async_in), .q(level));

    assign rise      = level && !prev;
    assign fall      = !level && prev;
    assign long_high = (high_cnt == HW'(HOLD));

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            prev     <= 1'b0;
            gap_cnt  <= GW'(MIN_GAP);
            high_cnt <= '0;
            too_fast <= 1'b0;
        end else begin
            prev <= level;
            if (rise) begin
                gap_cnt <= '0;
                if (gap_cnt != GW'(MIN_GAP))
                    too_fast <= 1'b1;
            end else if (gap_cnt != GW'(MIN_GAP)) begin
                gap_cnt <= gap_cnt + 1'b1;
            end
            if (clear)
                too_fast <= 1'b0;
            if (!level)
                high_cnt <= '0;
            else if (!long_high)
                high_cnt <= high_cnt + 1'b1;
        end
    end
endmodule
