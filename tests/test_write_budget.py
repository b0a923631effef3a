"""A run's writes are held to simulator.run_write_mb in every format (issue 57).

Each run works in a fresh tmpfs of its budget (plus room for its coverage); what its files held
when it ended, with its output, is judged against the budget. Over it, the run is a one-line
runtime_error naming the setting, no coverage counted, and none of its files survive. Here the
design itself writes a 3 MB file on each cycle its `go` input is high, so the same stimulus goes
over the budget (4 files, 12 MB > 8 MB) or stays under it (2 files) in whichever format it is
written: testbench, body, vectors (alone and in a batch) and cocotb. Real Verilator, real jail.
"""
from __future__ import annotations

import dataclasses

import pytest

from chorus.core.task import Task
from chorus.sim import SimConfig
from chorus.stimulus.aliases import alias_map
from chorus.stimulus.formats import FORMATS, render, score, score_many
from chorus.stimulus.program import Program, Step

SCRIBE = """module scribe(input logic clk, input logic rst_n, input logic go, output logic [2:0] n);
  integer fd, i;
  always @(posedge clk or negedge rst_n) begin
    if (!rst_n) n <= 3'd0;
    else if (go) begin
      case (n)
        3'd0: fd = $fopen("log0.bin", "w");
        3'd1: fd = $fopen("log1.bin", "w");
        3'd2: fd = $fopen("log2.bin", "w");
        default: fd = $fopen("log3.bin", "w");
      endcase
      for (i = 0; i < 3 * 1024; i++) $fwrite(fd, "%01024d", 0);
      $fclose(fd);
      n <= n + 3'd1;
    end
  end
endmodule
"""
SPEC = """- `clk` (1-bit): rising-edge clock.
- `rst_n` (1-bit): active-low reset.
- `go` (1-bit): write one 3 MB file on this cycle.
- `n` (3-bit): files written.
"""
BUDGET = "simulator.run_write_mb=8 MB"


@pytest.fixture
def task() -> Task:
    return Task(id="scribe", spec=SPEC, rtl={"rtl/scribe.sv": SCRIBE}, top="scribe", instance="uut",
                targets={"overall": 90.0})


@pytest.fixture
def cfg(cache_root, work) -> SimConfig:
    return SimConfig(cache=False, cache_dir=str(cache_root), run_timeout_s=20, run_write_mb=8, output_limit_mb=4)


def program(task: Task, files: int) -> Program:
    go = next(a.alias for a in alias_map(task).inputs if a.port == "go")
    return Program([Step((), 2, True), *([Step(((go, 1),), files)] if files else []), Step(((go, 0),), 3)])


def files_left(work) -> list[str]:
    return [p.name for p in work.rglob("log*.bin")]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_a_run_over_its_write_budget_is_refused_in_every_format(task, cfg, work, fmt):
    over = score(fmt, task, render(fmt, task, program(task, 4)), cfg)
    assert over.status == "runtime_error" and BUDGET in over.reason, (over.status, over.reason)
    assert over.report is None and "\n" not in over.reason
    assert files_left(work) == []
    under = score(fmt, task, render(fmt, task, program(task, 2)), cfg)
    assert under.status == "ok", (under.status, under.reason)
    assert under.report.overall > 0
    wide = score(fmt, task, render(fmt, task, program(task, 4)), dataclasses.replace(cfg, run_write_mb=16))
    assert wide.status == "ok", (wide.status, wide.reason)  # the same run fits a larger budget
    assert files_left(work) == []


@pytest.mark.slow
def test_in_a_batch_only_the_program_over_budget_is_charged(task, cfg, work):
    texts = [render("vectors", task, program(task, n)) for n in (2, 4, 1, 4, 0)]
    batch = score_many("vectors", task, texts, cfg)
    alone = [score("vectors", task, t, cfg) for t in texts]
    assert [r.status for r in batch] == ["ok", "runtime_error", "ok", "runtime_error", "ok"]
    assert [(r.status, r.reason, r.report and r.report.to_dict()) for r in batch] == \
        [(r.status, r.reason, r.report and r.report.to_dict()) for r in alone]
    assert files_left(work) == []
