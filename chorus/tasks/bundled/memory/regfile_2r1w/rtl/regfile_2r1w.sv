// Register file with two combinational read ports and one write port.
// Register 0 always reads as zero and cannot be written. Writing LOCK_KEY to
// the last register locks the upper half of the registers against writes
// until unlock is pulsed. With BYPASS=1 a read of the register being written
// in the same cycle returns the new data.
module regfile_2r1w #(
    parameter int NREG   = 16,
    parameter int W      = 16,
    parameter bit BYPASS = 1'b1,
    parameter logic [W-1:0] LOCK_KEY = 16'hC0DE
) (
    input  logic                    clk,
    input  logic                    rst_n,
    input  logic                    we,
    input  logic [$clog2(NREG)-1:0] waddr,
    input  logic [W-1:0]            wdata,
    input  logic                    unlock,
    input  logic [$clog2(NREG)-1:0] raddr1,
    input  logic [$clog2(NREG)-1:0] raddr2,
    output logic [W-1:0]            rdata1,
    output logic [W-1:0]            rdata2,
    output logic                    fwd1,
    output logic                    fwd2,
    output logic                    r0_write,
    output logic                    prot_err,
    output logic                    locked
);
    localparam int AW = $clog2(NREG);

    logic [W-1:0] regs [1:NREG-1];
    logic         protected_w;
    logic         wr_ok;

    assign protected_w = locked && (waddr >= AW'(NREG / 2));
    assign wr_ok       = we && (waddr != '0) && !protected_w;

    always_ff @(posedge clk) begin
        if (wr_ok)
            regs[waddr] <= wdata;
    end

    if (BYPASS) begin : g_bypass
        assign fwd1 = wr_ok && (waddr == raddr1);
        assign fwd2 = wr_ok && (waddr == raddr2);
    end else begin : g_no_bypass
        assign fwd1 = 1'b0;
        assign fwd2 = 1'b0;
    end

    always_comb begin
        if (raddr1 == '0)  rdata1 = '0;
        else if (fwd1)     rdata1 = wdata;
        else               rdata1 = regs[raddr1];
        if (raddr2 == '0)  rdata2 = '0;
        else if (fwd2)     rdata2 = wdata;
        else               rdata2 = regs[raddr2];
    end

    // lock state and registered error pulses for the write of the previous cycle
    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            r0_write <= 1'b0;
            prot_err <= 1'b0;
            locked   <= 1'b0;
        end else begin
            r0_write <= we && (waddr == '0);
            prot_err <= we && protected_w;
            if (unlock)
                locked <= 1'b0;
            else if (wr_ok && waddr == AW'(NREG - 1) && wdata == LOCK_KEY)
                locked <= 1'b1;
        end
    end
endmodule
