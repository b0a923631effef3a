// Single-port 32-bit RAM with byte enables and registered read data.
// Only addresses below DEPTH exist: other addresses raise addr_err and are
// not written (a read returns BAD_DATA). The last word is a configuration
// word that only accepts full-word writes; a partial write there is
// rejected and raises be_err. When the configuration word holds the key
// 8'hA5 in its top byte and has bit 0 set, the first WP_WORDS words are
// write-protected (wp_active); writes there are rejected and raise wp_err.
module sp_ram_be #(
    parameter int          AW       = 5,
    parameter int          DEPTH    = 20,
    parameter int          WP_WORDS = 4,
    parameter logic [31:0] BAD_DATA = 32'hDEAD_BEEF
) (
    input  logic          clk,
    input  logic          rst_n,
    input  logic          en,
    input  logic          we,
    input  logic [AW-1:0] addr,
    input  logic [3:0]    be,
    input  logic [31:0]   wdata,
    output logic [31:0]   rdata,
    output logic          rvalid,
    output logic          addr_err,
    output logic          be_err,
    output logic          wp_err,
    output logic          wp_active,
    output logic [3:0]    last_be
);
    localparam logic [AW-1:0] CFG_ADDR = AW'(DEPTH - 1);

    logic [31:0] mem [0:DEPTH-1];
    logic        in_range;
    logic        cfg_partial;
    logic        wp_hit;
    logic        do_write;
    logic [31:0] cfg_q;

    assign in_range    = (addr < AW'(DEPTH));
    assign cfg_partial = (addr == CFG_ADDR) && (be != 4'b1111);
    assign wp_active   = (cfg_q[31:24] == 8'hA5) && cfg_q[0];
    assign wp_hit      = wp_active && (addr < AW'(WP_WORDS));
    assign do_write    = en && we && in_range && !cfg_partial && !wp_hit;

    // memory array: byte lanes written independently
    always_ff @(posedge clk) begin
        if (do_write) begin
            for (int b = 0; b < 4; b++)
                if (be[b])
                    mem[addr][b*8 +: 8] <= wdata[b*8 +: 8];
        end
    end

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            rdata    <= '0;
            rvalid   <= 1'b0;
            addr_err <= 1'b0;
            be_err   <= 1'b0;
            wp_err   <= 1'b0;
            last_be  <= '0;
            cfg_q    <= '0;
        end else begin
            rvalid   <= en && !we;
            addr_err <= en && !in_range;
            be_err   <= en && we && in_range && cfg_partial;
            wp_err   <= en && we && wp_hit;
            if (do_write)
                last_be <= be;
            if (do_write && addr == CFG_ADDR)
                cfg_q <= wdata;
            if (en && !we)
                rdata <= in_range ? mem[addr] : BAD_DATA;
        end
    end
endmodule
