// Byte-serial CRC-8 (polynomial x^8+x^2+x+1 = 0x07, init 0x00, MSB first,
// no reflection, no final XOR). Appending the CRC byte to a message makes
// the CRC over the whole message zero, which sets crc_ok.
module crc8_check (
    input  logic       clk,
    input  logic       rst_n,
    input  logic       start,
    input  logic       data_valid,
    input  logic [7:0] data,
    input  logic       last,
    output logic [7:0] crc_out,
    output logic       done,
    output logic       crc_ok
);
    localparam logic [7:0] POLY = 8'h07;

    function automatic logic [7:0] crc8_byte(input logic [7:0] crc,
                                             input logic [7:0] d);
        logic [7:0] c;
        c = crc ^ d;
        for (int i = 0; i < 8; i++) begin
            c = c[7] ? ((c << 1) ^ POLY) : (c << 1);
        end
        return c;
    endfunction

    logic accept;

    // Bytes are taken while a message is open; after `last` the result is
    // frozen until the next start.
    assign accept = data_valid && !done && !start;
    assign crc_ok = done && (crc_out == 8'h00);

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            crc_out <= 8'h00;
            done    <= 1'b0;
        end else if (start) begin
            crc_out <= 8'h00;
            done    <= 1'b0;
        end else if (accept) begin
            crc_out <= crc8_byte(crc_out, data);
            if (last) done <= 1'b1;
        end
    end
endmodule
