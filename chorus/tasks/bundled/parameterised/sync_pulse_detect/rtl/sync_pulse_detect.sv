// WIDTH asynchronous inputs, each synchronized and edge-detected by its own
// sync_bit instance, with summary flags across all bits.
module sync_pulse_detect #(
    parameter int WIDTH   = 3,
    parameter int STAGES  = 3,
    parameter int MIN_GAP = 4,
    parameter int HOLD    = 10
) (
    input  logic             clk,
    input  logic             rst_n,
    input  logic             clear,
    input  logic [WIDTH-1:0] async_in,
    output logic [WIDTH-1:0] level,
    output logic [WIDTH-1:0] rise,
    output logic [WIDTH-1:0] fall,
    output logic [WIDTH-1:0] too_fast,
    output logic [WIDTH-1:0] long_high,
    output logic             any_edge,
    output logic             coincident
);
    for (genvar i = 0; i < WIDTH; i++) begin : g_bit
        sync_bit #(.STAGES(STAGES), .MIN_GAP(MIN_GAP), .HOLD(HOLD), .BIT(i)) u_bit (
            .clk(clk), .rst_n(rst_n), .clear(clear), .async_in(async_in[i]),
            .level(level[i]), .rise(rise[i]), .fall(fall[i]),
            .too_fast(too_fast[i]), .long_high(long_high[i])
        );
    end

    assign any_edge   = |(rise | fall);
    // every bit rises in the same cycle
    assign coincident = &rise;
endmodule
