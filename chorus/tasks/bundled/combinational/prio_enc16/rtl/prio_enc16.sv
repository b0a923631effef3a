// 16-input priority encoder with request mask, selectable priority direction,
// valid / multiple-request / saturation flags.
module prio_enc16 (
    input  logic [15:0] req,
    input  logic [15:0] mask,
    input  logic        lsb_first,
    output logic [3:0]  idx,
    output logic        valid,
    output logic        multi,
    output logic        all_req
);
    logic [15:0] eff;
    logic [15:0] scan;
    logic [3:0]  pos;

    assign eff = req & ~mask;

    // Normalise so that the highest-priority request is always the MSB side.
    always_comb begin
        for (int i = 0; i < 16; i++)
            scan[i] = lsb_first ? eff[15 - i] : eff[i];
    end

    always_comb begin
        valid = 1'b1;
        casez (scan)
            16'b1???_????_????_????: pos = 4'd15;
            16'b01??_????_????_????: pos = 4'd14;
            16'b001?_????_????_????: pos = 4'd13;
            16'b0001_????_????_????: pos = 4'd12;
            16'b0000_1???_????_????: pos = 4'd11;
            16'b0000_01??_????_????: pos = 4'd10;
            16'b0000_001?_????_????: pos = 4'd9;
            16'b0000_0001_????_????: pos = 4'd8;
            16'b0000_0000_1???_????: pos = 4'd7;
            16'b0000_0000_01??_????: pos = 4'd6;
            16'b0000_0000_001?_????: pos = 4'd5;
            16'b0000_0000_0001_????: pos = 4'd4;
            16'b0000_0000_0000_1???: pos = 4'd3;
            16'b0000_0000_0000_01??: pos = 4'd2;
            16'b0000_0000_0000_001?: pos = 4'd1;
            16'b0000_0000_0000_0001: pos = 4'd0;
            default: begin
                pos   = 4'd0;
                valid = 1'b0;
            end
        endcase
    end

    assign idx     = lsb_first ? (4'd15 - pos) : pos;
    assign multi   = valid && ((eff & (eff - 16'd1)) != 16'd0);
    assign all_req = (eff == 16'hFFFF) && (mask == 16'h0000);
endmodule
