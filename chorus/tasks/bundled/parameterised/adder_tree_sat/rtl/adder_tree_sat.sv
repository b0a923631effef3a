// Two-input adder node of the tree; NODE is its heap index (1 = root).
module tree_add_node #(
    parameter int W    = 8,
    parameter int NODE = 1
) (
    input  logic [W-1:0] a,
    input  logic [W-1:0] b,
    output logic [W-1:0] s
);
    assign s = a + b;
endmodule

// Signed adder tree over N lanes (N a power of two) built from tree_add_node
// instances in heap order, with per-lane enables, optional saturation to the
// lane width and an optional output register selected by a parameter.
module adder_tree_sat #(
    parameter int N        = 8,
    parameter int W        = 6,
    parameter bit REGISTER = 1'b1
) (
    input  logic                         clk,
    input  logic                         rst_n,
    input  logic [N*W-1:0]               operands,
    input  logic [N-1:0]                 lane_en,
    input  logic                         sat_en,
    output logic signed [W+$clog2(N)-1:0] sum,
    output logic signed [W-1:0]          result,
    output logic                         sat_hi,
    output logic                         sat_lo,
    output logic                         extreme,
    output logic                         no_lanes
);
    localparam int SW = W + $clog2(N);
    localparam logic signed [SW-1:0] RMAX = SW'((1 << (W - 1)) - 1);
    localparam logic signed [SW-1:0] RMIN = -SW'(1 << (W - 1));
    localparam logic signed [SW-1:0] TMAX = SW'(N * ((1 << (W - 1)) - 1));
    localparam logic signed [SW-1:0] TMIN = -SW'(N * (1 << (W - 1)));

    // node[1] is the root, node[N..2N-1] are the sign-extended, masked lanes
    logic [2*N-1:1][SW-1:0] node;
    logic signed [SW-1:0] total;
    logic signed [W-1:0]  res_c;
    logic                 hi_c, lo_c;

    for (genvar i = 0; i < N; i++) begin : g_leaf
        logic signed [W-1:0] lane;
        assign lane        = operands[i*W +: W];
        assign node[N + i] = lane_en[i] ? SW'(lane) : '0;
    end

    for (genvar i = 1; i < N; i++) begin : g_node
        tree_add_node #(.W(SW), .NODE(i)) u_add (.a(node[2*i]), .b(node[2*i+1]), .s(node[i]));
    end

    assign total = node[1];

    always_comb begin
        hi_c  = 1'b0;
        lo_c  = 1'b0;
        res_c = total[W-1:0];
        if (sat_en) begin
            if (total > RMAX) begin
                hi_c  = 1'b1;
                res_c = RMAX[W-1:0];
            end else if (total < RMIN) begin
                lo_c  = 1'b1;
                res_c = RMIN[W-1:0];
            end
        end
    end

    if (REGISTER) begin : g_reg
        always_ff @(posedge clk or negedge rst_n) begin
            if (!rst_n) begin
                sum <= '0; result <= '0; sat_hi <= 1'b0; sat_lo <= 1'b0;
                extreme <= 1'b0; no_lanes <= 1'b1;
            end else begin
                sum      <= total;
                result   <= res_c;
                sat_hi   <= hi_c;
                sat_lo   <= lo_c;
                extreme  <= (total == TMAX) || (total == TMIN);
                no_lanes <= (lane_en == '0);
            end
        end
    end else begin : g_comb
        assign sum      = total;
        assign result   = res_c;
        assign sat_hi   = hi_c;
        assign sat_lo   = lo_c;
        assign extreme  = (total == TMAX) || (total == TMIN);
        assign no_lanes = (lane_en == '0);
    end
endmodule
