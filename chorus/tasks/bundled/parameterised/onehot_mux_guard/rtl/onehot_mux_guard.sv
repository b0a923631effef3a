// Registered N-way one-hot multiplexer built from mux_lane instances.
// An all-zero select outputs DEFAULT; a select with several bits set is an
// error whose handling is chosen by LOWEST_WINS: 0 outputs DEFAULT, 1 passes
// the lowest selected lane. Errors are counted in a saturating counter.
module onehot_mux_guard #(
    parameter int           N           = 6,
    parameter int           W           = 8,
    parameter logic [W-1:0] DEFAULT     = 8'hA5,
    parameter bit           LOWEST_WINS = 1'b0
) (
    input  logic                 clk,
    input  logic                 rst_n,
    input  logic [N-1:0]         sel,
    input  logic [N*W-1:0]       data,
    input  logic                 clear_err,
    output logic [W-1:0]         y,
    output logic [$clog2(N)-1:0] out_idx,
    output logic                 none_err,
    output logic                 multi_err,
    output logic [3:0]           err_count,
    output logic                 err_sat
);
    localparam int IW = $clog2(N);

    logic [N-1:0][W-1:0] gated;
    logic [W-1:0]        or_all;
    logic [W-1:0]        low_data;
    logic [IW-1:0]       low_idx;
    logic                found;
    logic [W-1:0]        y_c;
    logic [IW-1:0]       idx_c;
    logic                one_hot, none, multi;

    for (genvar i = 0; i < N; i++) begin : g_lane
        mux_lane #(.W(W), .LANE(i)) u_lane (.sel(sel[i]), .data(data[i*W +: W]), .gated(gated[i]));
    end

    // OR of all gated lanes, plus the lowest selected lane and its index
    always_comb begin
        or_all   = '0;
        low_data = '0;
        low_idx  = '0;
        found    = 1'b0;
        for (int i = 0; i < N; i++) begin
            or_all = or_all | gated[i];
            if (sel[i] && !found) begin
                found    = 1'b1;
                low_data = gated[i];
                low_idx  = IW'(i);
            end
        end
    end

    assign none    = (sel == '0);
    assign one_hot = !none && ((sel & (sel - 1'b1)) == '0);
    assign multi   = !none && !one_hot;

    if (LOWEST_WINS) begin : g_lowest
        assign y_c   = none ? DEFAULT : (one_hot ? or_all : low_data);
        assign idx_c = low_idx;
    end else begin : g_default
        assign y_c   = one_hot ? or_all : DEFAULT;
        assign idx_c = one_hot ? low_idx : '0;
    end

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            y         <= DEFAULT;
            out_idx   <= '0;
            none_err  <= 1'b0;
            multi_err <= 1'b0;
            err_count <= '0;
            err_sat   <= 1'b0;
        end else begin
            y         <= y_c;
            out_idx   <= idx_c;
            none_err  <= none;
            multi_err <= multi;
            if (clear_err) begin
                err_count <= '0;
                err_sat   <= 1'b0;
            end else if (none || multi) begin
                if (err_count == 4'hF)
                    err_sat <= 1'b1;
                else
                    err_count <= err_count + 1'b1;
            end
        end
    end
endmodule
