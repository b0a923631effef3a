// Simple dual-port RAM (port A writes, port B reads) with a selectable
// read-during-write behaviour for same-address collisions, and a sticky
// hot-spot flag for collisions on one address in consecutive cycles.
//   rdw_mode 00: read-first  (port B returns the old contents)
//   rdw_mode 01: write-first (port B returns the data being written)
//   rdw_mode 10: poison      (port B returns POISON)
//   rdw_mode 11: reserved    (behaves as read-first and raises mode_err)
module dp_ram_rdw #(
    parameter int          AW     = 5,
    parameter int          DW     = 8,
    parameter logic [DW-1:0] POISON = 8'hEE
) (
    input  logic          clk,
    input  logic          rst_n,
    input  logic [1:0]    rdw_mode,
    input  logic          we_a,
    input  logic [AW-1:0] addr_a,
    input  logic [DW-1:0] wdata_a,
    input  logic          re_b,
    input  logic [AW-1:0] addr_b,
    output logic [DW-1:0] rdata_b,
    output logic          rvalid_b,
    output logic          collision,
    output logic [AW-1:0] coll_addr,
    output logic          mode_err,
    output logic          hot_spot
);
    logic [DW-1:0] mem [0:(1<<AW)-1];
    logic          coll_c;
    logic [DW-1:0] rd_c;

    assign coll_c = we_a && re_b && (addr_a == addr_b);

    always_comb begin
        rd_c = mem[addr_b];
        if (coll_c) begin
            case (rdw_mode)
                2'b01:   rd_c = wdata_a;
                2'b10:   rd_c = POISON;
                default: rd_c = mem[addr_b];
            endcase
        end
    end

    always_ff @(posedge clk) begin
        if (we_a)
            mem[addr_a] <= wdata_a;
    end

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            rdata_b   <= '0;
            rvalid_b  <= 1'b0;
            collision <= 1'b0;
            coll_addr <= '0;
            mode_err  <= 1'b0;
            hot_spot  <= 1'b0;
        end else begin
            rvalid_b  <= re_b;
            collision <= coll_c;
            mode_err  <= coll_c && (rdw_mode == 2'b11);
            if (re_b)
                rdata_b <= rd_c;
            if (coll_c) begin
                coll_addr <= addr_a;
                if (collision && coll_addr == addr_a)
                    hot_spot <= 1'b1;
            end
        end
    end
endmodule
