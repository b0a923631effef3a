"""Coverage is counted by source and instance: a point counts when it comes from the task's own
RTL files and lies under the DUT instance (the path holding points of the top module's
declaration), whatever module copy Verilator made (parameter-specialised `lane__K5`), and never
because of a module's name. The DUT is measured at the parameters the task states. Real Verilator
runs, hand-counted."""
from __future__ import annotations

import pytest

from chorus.sim import SimConfig, simulate
from chorus.core.task import Task

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
@pytest.mark.parametrize("override", ["", "#(.W(4)) "], ids=["plain", "the stated value restated"])
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


HONEST = TB.format(override="")


def _blocks(r):
    return r.report.counts["block"] if r.report else None


@pytest.mark.slow
@pytest.mark.parametrize("fake", [
    # Verilator names this `top___P1`, which a name rule once mapped back to the design unit `top`
    "module tb; logic clk = 0; top_ #(.P(1)) uut(.clk(clk)); always #5 clk = ~clk; initial #200 $finish; endmodule\n"
    "module top_ #(parameter int P = 0)(input logic clk); logic t = 0; always @(posedge clk) t <= ~t; endmodule\n",
    # the same as an interface, and with a long parameter name Verilator hashes
    "interface top_ #(parameter int PARAMETER_WITH_A_VERY_LONG_NAME_THAT_VERILATOR_HASHES_AWAY = 0)"
    "(input logic clk); logic t = 0; always @(posedge clk) t <= ~t; endinterface\n"
    "module tb; logic clk = 0; top_ #(.PARAMETER_WITH_A_VERY_LONG_NAME_THAT_VERILATOR_HASHES_AWAY(3)) uut(.clk(clk));"
    " always #5 clk = ~clk; initial #200 $finish; endmodule\n",
    # a unit named exactly like a copy of the design's top: allowed now, and never the design
    "module top__W8(input logic clk); logic t = 0; always @(posedge clk) t <= ~t; endmodule\n"
    "module tb; logic clk = 0; top__W8 uut(.clk(clk)); always #5 clk = ~clk; initial #200 $finish; endmodule\n",
], ids=["module-named-like-a-copy", "interface-hashed-parameter", "exact-copy-name"])
def test_a_testbench_module_is_never_scored_as_the_dut(cfg, fake):
    task = Task(id="lanes", spec="", rtl={"rtl/top.sv": LANES}, top="top", instance="uut")
    r = simulate(task, fake, cfg)
    assert r.status == "ok" and r.report is None and "no coverage points of module top" in r.reason, r


@pytest.mark.slow
def test_a_wrapper_around_the_dut_adds_nothing_of_its_own(cfg):
    """A testbench module named like a copy of the design, padding the real DUT with code that
    any clock covers: only the real DUT's points count, exactly as in the honest run."""
    task = Task(id="lanes", spec="", rtl={"rtl/top.sv": LANES}, top="top", instance="uut")
    wrapper = TB.format(override="").replace("top uut(", "top_pad uut(") + """
module top_pad #(parameter int P = 1)(input logic clk, input logic [3:0] a, output logic [3:0] y0, output logic [3:0] y1);
  logic [7:0] t = 0; always @(posedge clk) begin t <= t + 1; if (t[0]) t[7] <= 1; else t[6] <= 1; end
  top uut(.clk(clk), .a(a), .y0(y0), .y1(y1));
endmodule
"""
    honest, padded = simulate(task, HONEST, cfg), simulate(task, wrapper, cfg)
    assert padded.status == "ok" and padded.report.instance == "TOP.tb.uut.uut", padded.reason
    assert padded.report.counts == honest.report.counts and padded.report.overall == honest.report.overall


@pytest.mark.slow
@pytest.mark.parametrize("how", [
    '`line 1 "rtl/top.sv" 0\n',
    'initial $display("`line 1 \\"rtl/top.sv\\" 0");\n',
], ids=["directive", "in-a-string"])
def test_line_directives_cannot_give_testbench_code_the_rtls_file_name(cfg, how):
    task = Task(id="lanes", spec="", rtl={"rtl/top.sv": LANES}, top="top", instance="uut")
    fake = ("module tb; logic clk = 0; helper uut(.clk(clk)); always #5 clk = ~clk; initial #200 $finish; endmodule\n"
            "module helper(input logic clk);\n" + how + "logic t = 0; always @(posedge clk) t <= ~t; endmodule\n")
    r = simulate(task, fake, cfg)
    if how.startswith("`line"):
        # Verilator's own marker for it is pinned to the testbench's file: nothing counts as the DUT
        assert r.status == "ok" and r.report is None, r
    else:
        assert r.status == "rejected" and "`line" in r.reason, r


@pytest.mark.slow
def test_the_testbench_never_takes_an_rtl_files_place(cfg):
    """A task file at verif/tb.sv: the testbench is written beside it, not over it."""
    task = Task(id="lanes", spec="", rtl={"rtl/top.sv": LANES, "verif/tb.sv": "// the task's own file\n"}, top="top",
                instance="uut")
    r = simulate(task, HONEST, cfg)
    assert r.status == "ok" and r.report.counts["block"] == [5, 6], r


@pytest.mark.slow
@pytest.mark.parametrize("override, verdict", [
    ("#(.W(8)) ", "W = 8, where the task states W = 4"),
    ("#(8) ", "W = 8, where the task states W = 4"),
    ("", None),
], ids=["named", "positional", "none"])
def test_the_dut_is_measured_at_the_tasks_parameters(cfg, override, verdict):
    task = Task(id="lanes", spec="", rtl={"rtl/top.sv": LANES}, top="top", instance="uut")
    r = simulate(task, TB.format(override=override), cfg)
    if verdict is None:
        assert r.status == "ok", r
    else:
        assert r.status == "rejected" and verdict in r.reason and "the task fixes its parameters" in r.reason, r.reason


@pytest.mark.slow
def test_a_defparam_is_judged_by_what_it_elaborates_to(cfg):
    task = Task(id="lanes", spec="", rtl={"rtl/top.sv": LANES}, top="top", instance="uut")
    same = simulate(task, HONEST.replace("always #5", "defparam uut.W = 4;\n  always #5"), cfg)
    assert same.status == "ok" and same.report.counts["block"] == [5, 6], same
    # a submodule's parameter: the top's own values are unchanged, the instance below is not
    nested = Task(id="nested", spec="", rtl={"rtl/top.sv": LANES.replace("lane #(.K(7)) l1", "lane l1")}, top="top",
                  instance="uut")
    deep = simulate(nested, HONEST.replace("always #5", "defparam uut.l1.K = 3;\n  always #5"), cfg)
    assert deep.status == "rejected" and "parameters inside it" in deep.reason, deep.reason


@pytest.mark.slow
def test_a_task_may_allow_a_set_of_parameter_values(cfg):
    task = Task(id="lanes", spec="", rtl={"rtl/top.sv": LANES}, top="top", instance="uut", parameters={"W": [4, 8]})
    assert simulate(task, TB.format(override="#(.W(8)) "), cfg).status == "ok"
    r = simulate(task, TB.format(override="#(.W(6)) "), cfg)
    assert r.status == "rejected" and "W = 6, where the task states 4 or 8" in r.reason, r.reason
    fixed = Task(id="lanes8", spec="", rtl={"rtl/top.sv": LANES}, top="top", instance="uut", parameters={"W": 8})
    assert simulate(fixed, TB.format(override=""), cfg).status == "rejected"
    assert simulate(fixed, TB.format(override="#(.W(8)) "), cfg).status == "ok"


@pytest.mark.slow
def test_chorus_harnesses_instantiate_the_dut_at_the_stated_parameters(cfg):
    """The body skeleton's DUT: widths and instance at the task's values, which pass the check."""
    from chorus.stimulus.aliases import alias_map
    from chorus.stimulus.skeleton import body_testbench

    rtl = ("module wide #(parameter int W = 4)(input logic clk, input logic [W-1:0] a, output logic [W-1:0] y);\n"
           "  always_ff @(posedge clk) y <= a;\nendmodule\n")
    task = Task(id="wide", spec="", rtl={"rtl/wide.sv": rtl}, top="wide", instance="uut", parameters={"W": 8})
    amap = alias_map(task)
    assert [a.width for a in amap.inputs] == [8] and [a.width for a in amap.outputs] == [8]
    r = simulate(task, body_testbench(task, amap, "repeat (4) @(negedge clk) in0 = in0 + 8'd33;"), cfg)
    assert r.status == "ok" and r.report.instance.endswith(".uut"), r


DECODER = """module dec(input logic clk, input logic [1:0] sel, output logic [3:0] y);
  function automatic logic [3:0] f(input logic [1:0] s);
    case (s) 2'd0: return 4'd1; 2'd1: return 4'd2; 2'd2: return 4'd4; default: return 4'd8; endcase
  endfunction
  function automatic logic [3:0] g(input logic [1:0] s); return y ^ {2'b0, s}; endfunction
  always_ff @(posedge clk) y <= f(sel);
endmodule
"""
DEC_TB = """module tb; logic clk = 0; logic [1:0] sel = 0; logic [3:0] y; logic [3:0] e;
  dec uut(.*); always #5 clk = ~clk;
  initial begin {body} #30 $finish; end
endmodule
"""


@pytest.mark.slow
def test_a_pure_dut_function_may_be_called_and_its_calls_add_no_coverage(cfg):
    task = Task(id="dec", spec="", rtl={"rtl/dec.sv": DECODER}, top="dec", instance="uut")
    still = simulate(task, DEC_TB.format(body=""), cfg)
    called = simulate(task, DEC_TB.format(body="for (int i = 0; i < 4; i++) e = uut.f(i);"), cfg)
    driven = simulate(task, DEC_TB.format(body="for (int i = 0; i < 4; i++) begin sel = i; #10; end"), cfg)
    assert {still.status, called.status, driven.status} == {"ok"}, (called.status, called.reason)
    # f's case over every input, run from the testbench, is not the DUT's activity: coverage as if
    # never called; the same inputs through the port take the other case items
    assert called.report.counts == still.report.counts and called.overall == still.overall
    assert driven.overall > still.overall
    impure = simulate(task, DEC_TB.format(body="e = uut.g(1);"), cfg)  # g reads the DUT's register y
    assert impure.status == "rejected" and "not a pure function" in impure.reason, impure.reason
