`timescale 1ns/1ps
module tb_cam_match;
    localparam int ENTRIES = 8, KW = 16, IW = 3;
    logic clk = 0, rst_n = 0, wr_en = 0, wr_valid = 0, search_en = 0;
    logic [IW-1:0] wr_idx = '0;
    logic [KW-1:0] wr_key = '0, search_key = '0, search_mask = '1;
    logic found, match_any, match_multi, dup_reject, full;
    logic [ENTRIES-1:0] match_vec;
    logic [IW-1:0] match_idx, free_idx;

    cam_match #(.ENTRIES(ENTRIES), .KW(KW)) uut (
        .clk(clk), .rst_n(rst_n), .wr_en(wr_en), .wr_valid(wr_valid), .wr_idx(wr_idx), .wr_key(wr_key),
        .search_en(search_en), .search_key(search_key), .search_mask(search_mask), .found(found),
        .match_vec(match_vec), .match_any(match_any), .match_multi(match_multi), .match_idx(match_idx),
        .dup_reject(dup_reject), .full(full), .free_idx(free_idx)
    );

    always #5 clk = ~clk;

    task automatic wr(input logic v, input logic [IW-1:0] i, input logic [KW-1:0] k);
        wr_en = 1; wr_valid = v; wr_idx = i; wr_key = k; @(posedge clk); wr_en = 0;
    endtask

    task automatic search(input logic [KW-1:0] k, input logic [KW-1:0] m);
        search_en = 1; search_key = k; search_mask = m; @(posedge clk); search_en = 0;
    endtask

    // key stored in entry i: distinct keys, complementary upper/lower halves
    function automatic logic [KW-1:0] key_of(input int i);
        return {8'(i * 37), ~8'(i * 37)};
    endfunction

    initial begin
        repeat (2) @(posedge clk);
        rst_n = 1;
        search(16'h0000, 16'h0000);                // empty CAM
        for (int i = 0; i < ENTRIES; i++) wr(1, IW'(i), key_of(i));
        // exact search for every entry, and a miss
        for (int i = 0; i < ENTRIES; i++) search(key_of(i), 16'hFFFF);
        search(16'hFFFF, 16'hFFFF); search(16'h0000, 16'hFFFF);
        // masked searches: multiple matches
        search(16'h0000, 16'h0000);                // all entries
        search(16'h00FF, 16'hFF00);                // entry 0 only by its upper byte
        search(16'h0100, 16'h0100);                // entries with an odd upper byte
        search(16'h0000, 16'h0300);                // entries 0 and 4
        // duplicate writes: rejected; rewriting the same entry with its own key is fine
        wr(1, 3'd2, key_of(5)); wr(1, 3'd5, key_of(5)); wr(1, 3'd7, key_of(0));
        // invalidate in different orders so every free index appears
        for (int i = ENTRIES - 1; i >= 0; i--) wr(0, IW'(i), 16'h0000);
        for (int i = 0; i < ENTRIES; i++) wr(1, IW'(i), ~key_of(i));
        for (int i = 0; i < ENTRIES; i++) begin
            wr(0, IW'(i), 16'h0000); wr(1, IW'(i), key_of(i));
        end
        for (int i = 0; i < ENTRIES; i++) wr(0, IW'(i), 16'h0000);
        // write and search in the same cycle, duplicates by mask
        wr(1, 3'd6, 16'hAAAA); wr(1, 3'd1, 16'hAAAB);
        wr_en = 1; wr_valid = 1; wr_idx = 3'd3; wr_key = 16'h5555;
        search_en = 1; search_key = 16'h5555; search_mask = 16'hFFFF; @(posedge clk);
        wr_en = 0; search_en = 0;
        search(16'h5555, 16'hFFFF); search(16'hAAAA, 16'hFFFE);
        // random traffic
        for (int k = 0; k < 300; k++) begin
            wr_en       = $urandom_range(0, 2) == 0;
            wr_valid    = $urandom_range(0, 3) != 0;
            wr_idx      = $urandom;
            wr_key      = $urandom_range(0, 31);
            search_en   = $urandom;
            search_key  = $urandom_range(0, 31);
            search_mask = ($urandom_range(0, 2) == 0) ? 16'($urandom) : 16'hFFFF;
            @(posedge clk);
        end
        wr_en = 0; search_en = 0;
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (2) @(posedge clk);
        $finish;
    end
endmodule
