"""Coverage is counted by instance: every point under the DUT instance, whatever module copy
Verilator made of its modules (parameter-specialised `lane__K5`, a DUT renamed `top__W8` by a
testbench's parameter override), and nothing outside it. Real Verilator runs, hand-counted."""
from __future__ import annotations

import pytest

from chorus.sim import SimConfig, simulate
from chorus.tasks.schema import Task

LANES = """
module lane #(parameter K = 1) (input logic clk, input logic [3:0] a, output logic [3:0] y);
  always_ff @(posedge clk) if (a == K) y <= a + K; else y <= a;
endmodule
module top #(parameter W = 4) (input logic clk, input logic [3:0] a, output logic [3:0] y0, output logic [3:0] y1);
  lane #(.K(5)) l0(.clk(clk), .a(a), .y(y0));
  lane #(.K(7)) l1(.clk(clk), .a(a), .y(y1));
endmodule
"""
TB = """`timescale 1ns/1ps
module tb; logic clk = 0; logic [3:0] a = 0; logic [3:0] y0, y1;
  top {override}uut(.clk(clk), .a(a), .y0(y0), .y1(y1));
  always #5 clk = ~clk;
  initial begin repeat (6) begin @(negedge clk) a = a + 1; end @(negedge clk); $finish; end
endmodule
"""


@pytest.fixture
def cfg(cache_root) -> SimConfig:
    return SimConfig(cache=False, cache_dir=str(cache_root), run_timeout_s=20)


@pytest.mark.slow
@pytest.mark.parametrize("override", ["", "#(.W(8)) "], ids=["plain", "parameter override"])
def test_points_of_parameter_specialised_copies_count_under_the_dut(cfg, override):
    task = Task(id="lanes", spec="", rtl={"rtl/top.sv": LANES}, top="top", instance="uut")
    r = simulate(task, TB.format(override=override), cfg)
    assert r.status == "ok" and r.report.instance == "TOP.tb.uut", (r.status, r.reason)
    # Each lane (lane__K5, lane__K7) has a line point and if/else branches. `a` runs 1..6: the K=5
    # lane takes its `if` (a == 5), the K=7 lane never does. Scored by module name they were 0 of 0.
    assert r.report.counts["block"] == [5, 6]
    # Toggle bits: top's clk, a[4], y0[4], y1[4] and each lane's clk, a[4], y[4]: 13 + 9 + 9. `a`
    # counts 0..6, so a[3] never rises (in top and both lanes); y bits follow a (+K on a hit).
    covered, total = r.report.counts["toggle"]
    assert total == 31 and covered < total


@pytest.mark.slow
def test_a_testbench_unit_named_like_a_copy_of_a_design_module_is_refused(cfg):
    task = Task(id="lanes", spec="", rtl={"rtl/top.sv": LANES}, top="top", instance="uut")
    fake = "module top__W8(input logic clk, input logic [3:0] a, output logic [3:0] y0, y1); endmodule\n"
    r = simulate(task, fake + TB.format(override=""), cfg)
    assert r.status == "rejected" and "a copy of design unit 'top'" in r.reason, r.reason
