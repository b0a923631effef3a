// Bidirectional shift register with parallel load, serial input, rotate mode
// and a counter of shifts performed since the last load.
module shift_reg_dir #(
    parameter int WIDTH = 8
) (
    input  logic             clk,
    input  logic             rst_n,
    input  logic             load,
    input  logic [WIDTH-1:0] load_data,
    input  logic             shift_en,
    input  logic             dir_right,
    input  logic             rotate,
    input  logic             serial_in,
    output logic [WIDTH-1:0] q,
    output logic             serial_out,
    output logic             all_ones,
    output logic             all_zeros,
    output logic             shifted_full
);
    localparam int CW = $clog2(WIDTH + 1);

    logic [CW-1:0] shift_cnt;
    logic          fill_bit;

    // Bit shifted in: the bit falling off the other end when rotating.
    always_comb begin
        if (rotate)
            fill_bit = dir_right ? q[0] : q[WIDTH-1];
        else
            fill_bit = serial_in;
    end

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            q         <= '0;
            shift_cnt <= '0;
        end else if (load) begin
            q         <= load_data;
            shift_cnt <= '0;
        end else if (shift_en) begin
            if (dir_right)
                q <= {fill_bit, q[WIDTH-1:1]};
            else
                q <= {q[WIDTH-2:0], fill_bit};
            if (shift_cnt != CW'(WIDTH))
                shift_cnt <= shift_cnt + 1'b1;
        end
    end

    assign serial_out   = dir_right ? q[0] : q[WIDTH-1];
    assign all_ones     = &q;
    assign all_zeros    = ~|q;
    assign shifted_full = (shift_cnt == CW'(WIDTH));
endmodule
