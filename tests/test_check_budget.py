"""Issue 36: reading a design or a testbench is bounded, and deep RTL is read at all.

- Verilator's `--json-only` tree of a 600-deep else-if chain used to raise RecursionError in
  json.loads, and every sample of the task failed as its own compile_error.
- A few KB of macros or nested generate loops cost tens of seconds and hundreds of MB of trusted
  CPU in the scoring process; the checks now run in a child under simulator.check_timeout_s /
  check_mem_mb, and going over is the sample's one-line `rejected`.
- Issue 57: check_timeout_s bounds all of a sample's checks together (Verilator's tree dump
  included), and the build's Verilator run beside them stops when they refuse the sample.
"""
from __future__ import annotations

import dataclasses
import resource
import time

import pytest

from chorus.sim import SimConfig, simulate
from chorus.sim.pool import evaluate_many
from chorus.sim.json_tree import loads
from chorus.core.task import Task
from helpers import counter_tb

DEEP_TB = """module tb;
  logic [15:0] sel; logic [15:0] y;
  deep uut(.sel(sel), .y(y));
  initial begin
    for (int i = 0; i < 8; i++) begin sel = i[15:0]; #1; end
    $finish;
  end
endmodule
"""


def deep_task(n: int) -> Task:
    arms = "".join(f"    else if (sel == 16'd{i}) y = 16'd{i * 7 % 65536};\n" for i in range(1, n))
    rtl = (f"module deep(input logic [15:0] sel, output logic [15:0] y);\n  always_comb begin\n"
           f"    if (sel == 16'd0) y = 16'd1;\n{arms}    else y = 16'd0;\n  end\nendmodule\n")
    return Task(id=f"deep{n}", spec="deep", rtl={"rtl/deep.sv": rtl}, top="deep", instance="uut",
                targets={"overall": 1.0})


@pytest.fixture
def cfg(cache_root) -> SimConfig:
    return SimConfig(cache=False, cache_dir=str(cache_root), run_timeout_s=20)


def own_cpu_s() -> float:
    """CPU seconds of this (the scoring) process: what an unbounded check used to spend."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def macro_tb(lines: int) -> str:
    """~4 KB of source whose macros expand to ~16 KB a line: megabytes for pyslang to read."""
    defs = "`define M0(x) x\n" + "".join(f"`define M{i + 1}(x) `M{i}(x) + `M{i}(x)\n" for i in range(11))
    return defs + counter_tb("    repeat (3) @(posedge clk);\n    $finish;",
                             extra="  int z;\n" + "  initial z = `M11(1);\n" * lines)


GENERATE_TB = counter_tb("    repeat (3) @(posedge clk);\n    $finish;", extra="""
  for (genvar a = 0; a < 16; a++) begin : ga
    for (genvar b = 0; b < 16; b++) begin : gb
      for (genvar c = 0; c < 16; c++) begin : gc
        for (genvar d = 0; d < 16; d++) begin : gd
          for (genvar e = 0; e < 16; e++) begin : ge
            logic [7:0] x;
            assign x = a + b + c + d + e;
          end
        end
      end
    end
  end
""")


# Issue 57's parse-tree bomb: 0.5 KB whose Verilator tree is hundreds of MB (4096 x 16 blocks of arrays).
TREE_BOMB = counter_tb("    repeat (3) @(posedge clk);\n    $finish;", extra="""
  for (genvar a = 0; a < 16; a++) begin : ga
    for (genvar b = 0; b < 16; b++) begin : gb
      for (genvar c = 0; c < 16; c++) begin : gc
        for (genvar d = 0; d < 16; d++) begin : gd
          logic [7:0] x [4];
          assign x[0] = a + b;
          assign x[1] = c - d;
        end
      end
    end
  end
""")


def test_json_tree_reads_any_depth_and_what_json_reads():
    deep = "[" * 200_000 + "]" * 200_000
    value = loads(deep)
    for _ in range(199_999):
        value = value[0]
    assert value == []
    nested = '{"a":' * 50_000 + '{"b":[1,-2.5e3,true,false,null,"q\\"\\u00e9"]}' + "}" * 50_000
    value = loads(nested)
    for _ in range(50_000):
        value = value["a"]
    assert value == {"b": [1, -2500.0, True, False, None, 'q"\u00e9']}
    for bad in ("[" * 5000 + "]" * 4999, "[" * 5000 + "1,]" + "]" * 4999, '{"a" 1}' + " " * 0, "[1 2]"):
        with pytest.raises(ValueError):
            loads(bad if bad.startswith("[") and len(bad) > 100 else "[" * 3000 + bad + "]" * 3000)


@pytest.mark.slow
def test_a_600_deep_else_if_chain_scores_an_honest_testbench(cfg):
    r = simulate(deep_task(600), DEEP_TB, cfg)
    assert r.status == "ok", r.reason
    assert r.report is not None and r.report.overall > 0


def test_rtl_deeper_than_pyslang_parses_is_the_tasks_error_not_the_samples(cfg):
    r = simulate(deep_task(2000), DEEP_TB, cfg)
    assert r.status == "harness_error"
    assert "task deep2000" in r.reason and "\n" not in r.reason


def test_macro_expansion_is_bounded_by_the_check_budget(counter_task, cfg):
    cpu = own_cpu_s()
    r = simulate(counter_task, macro_tb(60), dataclasses.replace(cfg, check_timeout_s=1.0))
    assert r.status == "rejected", r.reason
    assert "simulator.check_timeout_s=1 s" in r.reason and "\n" not in r.reason
    assert own_cpu_s() - cpu < 3


def test_macro_expansion_is_bounded_by_the_memory_budget(counter_task, cfg):
    r = simulate(counter_task, macro_tb(60), dataclasses.replace(cfg, check_mem_mb=16))
    assert r.status == "rejected", r.reason
    assert "simulator.check_mem_mb=16" in r.reason and "\n" not in r.reason


def test_nested_generate_loops_are_bounded_by_the_check_budget(counter_task, cfg):
    cpu, t = own_cpu_s(), time.monotonic()
    r = simulate(counter_task, GENERATE_TB, dataclasses.replace(cfg, check_timeout_s=3.0))
    assert r.status == "rejected", r.reason
    assert "simulator.check_timeout_s=3 s" in r.reason and "\n" not in r.reason
    assert own_cpu_s() - cpu < 3
    # the bound covers all of the checks, and the build's Verilator run beside them stops with them
    assert time.monotonic() - t < 3 + 5


@pytest.mark.slow
def test_a_parse_tree_bomb_is_refused_within_the_check_budget(counter_task, cfg):
    """At the default budget: Verilator stops writing the tree at an eighth of check_mem_mb (the
    reader would need ~6x the file), and the build's own Verilator run beside the check stops with it."""
    simulate(counter_task, counter_tb("    $finish;"), cfg)  # the runtime objects of a fresh cache: built once
    t = time.monotonic()
    r = simulate(counter_task, TREE_BOMB, cfg)
    assert r.status == "rejected" and "parse tree is over 64 MB" in r.reason, r.reason
    assert "simulator.check_mem_mb=512 MB" in r.reason and "\n" not in r.reason
    assert time.monotonic() - t < cfg.check_timeout_s + 5


@pytest.mark.slow
def test_two_bombs_in_a_pool_leave_the_honest_jobs_results_alone(counter_task, cfg):
    honest = [counter_tb(f"    repeat ({k}) @(posedge clk);\n    $finish;") for k in (1, 3, 6, 9, 14, 20)]
    alone = [simulate(counter_task, tb, cfg) for tb in honest]
    jobs = [honest[0], GENERATE_TB, honest[1], honest[2], TREE_BOMB, *honest[3:]]
    t = time.monotonic()
    pooled = evaluate_many([(counter_task, tb) for tb in jobs], cfg, workers=2, fn=simulate)
    assert time.monotonic() - t < 2 * (cfg.check_timeout_s + 5)
    # (at the default budget the five-deep nest runs Verilator out of memory: the testbench's compile_error)
    assert [r.status for r in pooled] == ["ok", "compile_error", "ok", "ok", "rejected", "ok", "ok", "ok"]
    same = [(r.status, r.report.to_dict()) for r in pooled if r.status == "ok"]
    assert same == [(r.status, r.report.to_dict()) for r in alone]
    assert len({d["overall"] for _, d in same}) > 1  # the honest jobs differ: each got its own result

