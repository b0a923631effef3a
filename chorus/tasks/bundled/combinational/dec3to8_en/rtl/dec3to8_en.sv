// 3-to-8 line decoder used as a memory-mapped chip-select generator:
// decodes only when enabled and the page address matches PAGE.
// Includes a lamp-test override and selectable output polarity.
module dec3to8_en #(
    parameter logic [7:0] PAGE = 8'hC3
) (
    input  logic [2:0] sel,
    input  logic [7:0] page,
    input  logic       en,
    input  logic       lamp_test,
    input  logic       active_low,
    output logic [7:0] y,
    output logic       any_active,
    output logic       upper_half
);
    logic       hit;
    logic [7:0] onehot;

    assign hit = en && (page == PAGE);

    always_comb begin
        onehot = 8'h00;
        if (lamp_test) begin
            onehot = 8'hFF;
        end else if (hit) begin
            case (sel)
                3'd0: onehot = 8'b0000_0001;
                3'd1: onehot = 8'b0000_0010;
                3'd2: onehot = 8'b0000_0100;
                3'd3: onehot = 8'b0000_1000;
                3'd4: onehot = 8'b0001_0000;
                3'd5: onehot = 8'b0010_0000;
                3'd6: onehot = 8'b0100_0000;
                default: onehot = 8'b1000_0000;
            endcase
        end
    end

    assign y          = active_low ? ~onehot : onehot;
    assign any_active = lamp_test || hit;
    assign upper_half = hit && !lamp_test && sel[2];
endmodule
