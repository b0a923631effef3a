`timescale 1ns/1ps
module tb_prio_enc16;
    logic [15:0] req = '0, mask = '0;
    logic lsb_first = 0;
    logic [3:0] idx;
    logic valid, multi, all_req;

    prio_enc16 uut (
        .req(req), .mask(mask), .lsb_first(lsb_first),
        .idx(idx), .valid(valid), .multi(multi), .all_req(all_req)
    );

    initial begin
        void'($urandom(7));
        #5;
        for (int d = 0; d < 2; d++) begin
            lsb_first = d[0];
            mask = '0;
            // single requests: each position wins alone
            for (int i = 0; i < 16; i++) begin
                req = 16'h1 << i; #5;
            end
            // each position wins with lower-priority requests also pending
            for (int i = 0; i < 16; i++) begin
                req = d[0] ? (16'hFFFF << i) : (16'hFFFF >> (15 - i)); #5;
            end
            // none and all
            req = 16'h0000; #5;
            req = 16'hFFFF; #5;
            // mask hides the higher-priority requests
            for (int i = 0; i < 16; i++) begin
                req  = 16'hFFFF;
                mask = ~(16'h1 << i); #5;
            end
            mask = 16'hFFFF; #5;
        end
        // random stimulus
        repeat (60) begin
            req = 16'($urandom); mask = 16'($urandom) & 16'($urandom);
            lsb_first = 1'($urandom); #5;
        end
        req = '0; mask = '0; lsb_first = 0; #5;
        $finish;
    end
endmodule
