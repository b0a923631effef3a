// One lane of the one-hot multiplexer: passes its data only when selected.
// LANE is the lane number of this instance.
module mux_lane #(
    parameter int W    = 8,
    parameter int LANE = 0
) (
    input  logic         sel,
    input  logic [W-1:0] data,
    output logic [W-1:0] gated
);
    assign gated = sel ? data : '0;
endmodule
