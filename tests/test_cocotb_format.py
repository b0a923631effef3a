"""The cocotb format against real Verilator + cocotb: the same coverage as the vectors format,
the safety check before any run, clear statuses, and one build per design."""
import dataclasses
import time

import pytest

from chorus.sim.cache import default_cache_root
from chorus.stimulus.aliases import alias_map
from chorus.stimulus.formats import FORMATS, render, score
from chorus.stimulus.program import parse_vectors
from chorus.core.task import Task

RTL = """module codelock(input logic clk, input logic rst, input logic key_valid, input logic [3:0] key,
                output logic open, output logic [1:0] stage);
  typedef enum logic [1:0] {IDLE, ONE, TWO, OPEN} st_t;
  st_t st;
  always_ff @(posedge clk) begin
    if (rst) st <= IDLE;
    else if (key_valid) begin
      case (st)
        IDLE: st <= (key == 4'd3) ? ONE : IDLE;
        ONE:  st <= (key == 4'd7) ? TWO : IDLE;
        TWO:  st <= (key == 4'd1) ? OPEN : IDLE;
        default: st <= IDLE;
      endcase
    end
  end
  assign open = (st == OPEN);
  assign stage = st;
endmodule
"""
HEAD = "import random\nfrom cocotb.triggers import ClockCycles, FallingEdge\n\n"
GOOD = HEAD + "async def stimulus(dut):\n    dut.in0.value = 1\n    dut.in1.value = 3\n    await FallingEdge(dut.clk)\n"


@pytest.fixture
def task():
    # Active-high `rst`, instance name other than uut: both must carry through the wrapper.
    return Task(id="codelock", spec="3-7-1 code lock", rtl={"codelock.sv": RTL}, top="codelock", instance="lock_i",
                targets={"overall": 90})


def assert_same_coverage(a, b):
    """Both scored ok, with the same coverage (counts, metrics, uncovered points); test_cocotb_isolation too."""
    assert a.status == b.status == "ok", (a.reason, b.reason)
    assert a.report.counts == b.report.counts and a.report.metrics == b.report.metrics
    assert sorted(u.what for u in a.report.uncovered) == sorted(u.what for u in b.report.uncovered)


@pytest.mark.parametrize("text", [
    "rst x2\nin0=1 in1=3\nin1=7\nin1=1\nin0=0 x2\nin0=1 in1=9 x2\nrst\nin0=0 x3\n",  # fixed values, opens the lock
    "rst\nin0=? in1=? x40\nin0=1 in1=3 x2\n. x3\n",  # random draws: the same seed gives the same values
])
def test_a_program_scores_exactly_like_vectors(task, sim_cfg, text):
    program = parse_vectors(text, alias_map(task))
    module = render("cocotb", task, program)
    cocotb, vectors = score("cocotb", task, module, sim_cfg), score("vectors", task, render("vectors", task, program),
                                                                     sim_cfg)
    assert_same_coverage(cocotb, vectors)
    assert cocotb.end == "finish" and cocotb.instance_ok and "FallingEdge(dut.clk)" in module
    if "?" not in text:
        assert_same_coverage(cocotb, score("body", task, render("body", task, program), sim_cfg))
        assert cocotb.report.metrics["expression"] == 100.0  # the lock opened


def test_second_evaluation_reuses_the_build(task, sim_cfg):
    assert "cocotb" in FORMATS
    score("cocotb", task, GOOD, sim_cfg)  # builds (or finds) the design once
    builds = sorted((default_cache_root(sim_cfg.cache_dir) / "cocotb").glob("*/sim"))
    t = time.monotonic()
    results = [score("cocotb", task, GOOD.replace("= 3", f"= {k}"), sim_cfg) for k in range(3)]
    assert all(r.status == "ok" and "build" not in r.seconds for r in results)
    assert (time.monotonic() - t) / 3 < 3.0
    assert sorted((default_cache_root(sim_cfg.cache_dir) / "cocotb").glob("*/sim")) == builds


@pytest.mark.parametrize("text, status, message", [
    ("import os\n" + GOOD, "rejected", "line 1: import of 'os' is not allowed"),
    (GOOD + "    open('/etc/passwd')\n", "rejected", "line 8: 'open' is not allowed"),
    (GOOD + "    __import__('os')\n", "rejected", "line 8: '__import__' is not allowed"),
    (GOOD + "    getattr(dut, 'in0').value = 1\n", "rejected", "line 8: 'getattr' is not allowed"),
    (GOOD + "    dut._handle\n", "rejected", "line 8: attribute '_handle' is not allowed"),
    ("import cocotb.clock\n" + GOOD + "    cocotb.clock.sys.exit()\n", "rejected", "cocotb.clock.sys is not allowed"),
    ("from cocotb.clock import Clock\n" + GOOD, "rejected", "chorus starts the clock"),
    (GOOD + "    dut.in9.value = 1\n", "compile_error",
     "line 8: unknown alias 'in9'; this design has clk, in0, in1, out0, out1, rst"),
    (GOOD + "    dut.out0.value = 1\n", "compile_error", "out0 is an output"),
    (GOOD + "    dut.in0.value = = 1\n", "compile_error", "line 8: syntax error"),
    (GOOD + "    x = 'a\0b'\n", "compile_error", "line 8: a NUL byte"),
    (HEAD + "async def stimulus(dut):\n    await ClockCycles(dut.clk, 5)\n    x = dut.out0.value\n", "empty",
     "never assigns"),
    ("", "empty", "empty stimulus module"),
    (HEAD + "def helper(dut):\n    dut.in0.value = 1\n", "compile_error", "define `async def stimulus(dut):`"),
])
def test_bad_modules_are_answered_before_any_run(task, sim_cfg, text, status, message):
    t = time.monotonic()
    r = score("cocotb", task, text, sim_cfg)
    assert r.status == status and message in r.reason, r.reason
    assert r.overall is None and time.monotonic() - t < 1.0


def test_an_exception_in_the_stimulus_keeps_coverage_and_names_the_line(task, sim_cfg):
    text = GOOD + "    await FallingEdge(dut.clk)\n    x = 1 // 0\n"
    r = score("cocotb", task, text, sim_cfg)
    assert r.status == "runtime_error" and r.end == "exception"
    assert "ZeroDivisionError at line 9" in r.reason and "coverage up to that point is kept" in r.reason
    assert r.overall is not None and r.overall > 0
    # A test-style module works too: the decorator is ignored, the function is the stimulus.
    decorated = "import cocotb\n" + GOOD.replace("async def stimulus", "@cocotb.test()\nasync def my_test_name")
    assert score("cocotb", task, decorated, sim_cfg).status == "ok"


def test_a_loop_without_await_stops_on_wall_clock_with_coverage(task, sim_cfg):
    cfg = dataclasses.replace(sim_cfg, run_timeout_s=7)
    r = score("cocotb", task, GOOD + "    while True:\n        pass\n", cfg)
    assert r.status == "timeout" and "without await" in r.reason and r.overall is not None


@pytest.mark.slow
def test_hundreds_of_concurrent_timers_all_fire_in_time_order(task, sim_cfg):
    """More timers than any fixed cap on one wait (once 256): each ends at its own time, in order,
    and timers ending at the same moment end together."""
    text = """import cocotb
from cocotb.triggers import Timer, FallingEdge
from cocotb.utils import get_sim_time

async def stimulus(dut):
    ended, t0 = [], get_sim_time("ns")  # the stimulus starts after chorus's reset

    async def sleeper(k):
        await Timer(1 + k // 2, "ns")
        ended.append((k, get_sim_time("ns")))

    tasks = [cocotb.start_soon(sleeper(k)) for k in range(600)]
    for t in tasks:
        await t
    assert [k for k, _ in ended] == list(range(600)), ended[:10]
    assert all(at - t0 == 1 + k // 2 for k, at in ended), [e for e in ended if e[1] - t0 != 1 + e[0] // 2][:5]
    print("TIMERS", len(ended), get_sim_time("ns") - t0)
    dut.in0.value = 1
    dut.in1.value = 3
    await FallingEdge(dut.clk)
"""
    r = score("cocotb", task, text, sim_cfg)
    assert r.status == "ok", r.reason
    assert "TIMERS 600 300.0" in r.run_log, r.run_log[-500:]
