// One-bit full adder. POS numbers the cell within the whole adder.
module full_adder #(
    parameter int POS = 0
) (
    input  logic a,
    input  logic b,
    input  logic cin,
    output logic s,
    output logic cout
);
    assign s    = a ^ b ^ cin;
    assign cout = (a & b) | (cin & (a ^ b));
endmodule
