"""Small designs and testbench builders shared by the tests."""

AND2 = """module and2(input logic a, input logic b, output logic y);
  assign y = a & b;
endmodule
"""

COUNTER = """module cnt(input logic clk, input logic rst_n, input logic en, output logic [3:0] q, output logic top);
  logic [7:0] mem [0:3];
  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) q <= '0;
    else if (en) q <= q + 1'b1;
  end
  always_ff @(posedge clk) mem[q[1:0]] <= {4'h0, q};
  assign top = (q == 4'hf);
endmodule
"""


def counter_tb(body: str, extra: str = "") -> str:
    return f"""`timescale 1ns/1ps
module tb;
  logic clk = 0, rst_n = 0, en = 0; logic [3:0] q; logic top;
  cnt uut(.clk(clk), .rst_n(rst_n), .en(en), .q(q), .top(top));
  always #5 clk = ~clk;
{extra}
  initial begin
    #12 rst_n = 1; en = 1;
{body}
  end
endmodule
"""
