// Content-addressable memory with ENTRIES keys of KW bits. A search compares
// the (masked) search key against every valid entry in parallel and reports
// the match vector, the lowest matching index and a multiple-match flag.
// Writes of a key that is already stored in another valid entry are rejected.
module cam_match #(
    parameter int ENTRIES = 8,
    parameter int KW      = 16
) (
    input  logic                       clk,
    input  logic                       rst_n,
    input  logic                       wr_en,
    input  logic                       wr_valid,
    input  logic [$clog2(ENTRIES)-1:0] wr_idx,
    input  logic [KW-1:0]              wr_key,
    input  logic                       search_en,
    input  logic [KW-1:0]              search_key,
    input  logic [KW-1:0]              search_mask,
    output logic                       found,
    output logic [ENTRIES-1:0]         match_vec,
    output logic                       match_any,
    output logic                       match_multi,
    output logic [$clog2(ENTRIES)-1:0] match_idx,
    output logic                       dup_reject,
    output logic                       full,
    output logic [$clog2(ENTRIES)-1:0] free_idx
);
    localparam int IW = $clog2(ENTRIES);

    logic [KW-1:0]      keys [0:ENTRIES-1];
    logic [ENTRIES-1:0] valid;
    logic [ENTRIES-1:0] cmp;      // masked search compare
    logic [ENTRIES-1:0] dup;      // exact compare against the write key
    logic [IW-1:0]      first_idx;
    logic               dup_c;

    for (genvar i = 0; i < ENTRIES; i++) begin : g_entry
        assign cmp[i] = valid[i] && (((keys[i] ^ search_key) & search_mask) == '0);
        assign dup[i] = valid[i] && (keys[i] == wr_key) && (wr_idx != IW'(i));
    end

    assign dup_c = wr_valid && (|dup);

    // lowest matching entry and lowest free entry
    always_comb begin
        first_idx = '0;
        free_idx  = '0;
        for (int i = ENTRIES - 1; i >= 0; i--) begin
            if (cmp[i])
                first_idx = IW'(i);
            if (!valid[i])
                free_idx = IW'(i);
        end
    end

    assign full = &valid;

    always_ff @(posedge clk) begin
        if (wr_en && wr_valid && !dup_c)
            keys[wr_idx] <= wr_key;
    end

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            valid       <= '0;
            found       <= 1'b0;
            match_vec   <= '0;
            match_any   <= 1'b0;
            match_multi <= 1'b0;
            match_idx   <= '0;
            dup_reject  <= 1'b0;
        end else begin
            dup_reject <= wr_en && dup_c;
            if (wr_en && !dup_c)
                valid[wr_idx] <= wr_valid;
            found <= search_en;
            if (search_en) begin
                match_vec   <= cmp;
                match_any   <= |cmp;
                match_multi <= (cmp & (cmp - 1'b1)) != '0;
                match_idx   <= first_idx;
            end
        end
    end
endmodule
