// 16-bit population counter with programmable threshold compare and a level meter.
module popcount16_thresh (
    input  logic [15:0] din,
    input  logic [4:0]  thresh,
    input  logic [1:0]  cmp_mode,   // 0: >=, 1: <=, 2: ==, 3: !=
    output logic [4:0]  count,
    output logic        hit,
    output logic [2:0]  level,
    output logic        extreme,    // all zeros or all ones
    output logic        thresh_bad  // threshold above 16 can never be reached
);
    logic [7:0][1:0] s2;
    logic [3:0][2:0] s4;
    logic [1:0][3:0] s8;

    // Adder tree: pairs, nibbles, bytes, word.
    always_comb begin
        for (int i = 0; i < 8; i++) s2[i] = {1'b0, din[2*i]} + {1'b0, din[2*i+1]};
        for (int i = 0; i < 4; i++) s4[i] = {1'b0, s2[2*i]} + {1'b0, s2[2*i+1]};
        for (int i = 0; i < 2; i++) s8[i] = {1'b0, s4[2*i]} + {1'b0, s4[2*i+1]};
        count = {1'b0, s8[0]} + {1'b0, s8[1]};
    end

    always_comb begin
        thresh_bad = (thresh > 5'd16);
        case (cmp_mode)
            2'd0:    hit = (count >= thresh);
            2'd1:    hit = (count <= thresh);
            2'd2:    hit = (count == thresh);
            default: hit = (count != thresh);
        endcase
    end

    // Bar-graph style level: empty, low, mid-low, mid-high, high, full.
    always_comb begin
        if (count == 5'd0)
            level = 3'd0;
        else if (count < 5'd4)
            level = 3'd1;
        else if (count < 5'd8)
            level = 3'd2;
        else if (count < 5'd12)
            level = 3'd3;
        else if (count != 5'd16)
            level = 3'd4;
        else
            level = 3'd5;
    end

    assign extreme = (count == 5'd0) || (count == 5'd16);
endmodule
