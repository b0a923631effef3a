// N-stage valid/ready pipeline built from a generate loop of pipe_stage.
// Each stage has its own stall request. Status outputs report occupancy,
// full/empty and a timeout when the output is back-pressured too long.
module pipe_stall_chain #(
    parameter int N          = 4,
    parameter int W          = 8,
    parameter int HOLD_LIMIT = 5
) (
    input  logic                   clk,
    input  logic                   rst_n,
    input  logic                   flush,
    input  logic [N-1:0]           stall,
    input  logic                   in_valid,
    input  logic [W-1:0]           in_data,
    output logic                   in_ready,
    output logic                   out_valid,
    output logic [W-1:0]           out_data,
    input  logic                   out_ready,
    output logic [$clog2(N+1)-1:0] occupancy,
    output logic                   full,
    output logic                   empty,
    output logic                   hold_timeout
);
    logic [N:0]        v;      // v[i] = valid into stage i, v[N] = pipeline output
    logic [N:0]        rdy;    // rdy[i] = ready into stage i, rdy[N] = out_ready
    logic [N:0][W-1:0] d;
    localparam int CW = $clog2(HOLD_LIMIT + 1);
    logic [CW-1:0]     hold_cnt;

    assign v[0]   = in_valid;
    assign d[0]   = in_data;
    assign rdy[N] = out_ready;

    for (genvar i = 0; i < N; i++) begin : g_stage
        pipe_stage #(.W(W), .IDX(i)) u_stage (
            .clk(clk), .rst_n(rst_n), .flush(flush), .stall_req(stall[i]),
            .in_valid(v[i]), .in_data(d[i]), .in_ready(rdy[i]),
            .out_valid(v[i+1]), .out_data(d[i+1]), .out_ready(rdy[i+1])
        );
    end

    assign in_ready  = rdy[0];
    assign out_valid = v[N];
    assign out_data  = d[N];

    always_comb begin
        occupancy = '0;
        for (int i = 1; i <= N; i++)
            occupancy = occupancy + {{($clog2(N+1)-1){1'b0}}, v[i]};
    end

    assign full  = &v[N:1];
    assign empty = ~|v[N:1];

    // Output held valid without out_ready for more than HOLD_LIMIT cycles.
    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            hold_cnt     <= '0;
            hold_timeout <= 1'b0;
        end else if (flush) begin
            hold_cnt     <= '0;
            hold_timeout <= 1'b0;
        end else if (out_valid && !out_ready) begin
            if (hold_cnt == CW'(HOLD_LIMIT))
                hold_timeout <= 1'b1;
            else
                hold_cnt <= hold_cnt + 1'b1;
        end else begin
            hold_cnt <= '0;
        end
    end
endmodule
