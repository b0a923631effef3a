"""Many vectors programs in one simulator process (sim/batch.py): each result is what the program gets
alone, bit for bit, and a program that hangs, floods, crashes or leaves files behind costs only its own
result."""
import dataclasses

import pytest

from chorus.sim import SimConfig
from chorus.sim import batch as batch_mod
from chorus.sim import execute
from chorus.stimulus.aliases import alias_map
from chorus.stimulus.formats import render, score, score_many
from chorus.stimulus.program import random_program
from chorus.tasks import load_bundled, load_tasks
from chorus.core.task import Task


def outcome(r) -> tuple:
    """Everything a result says about the sample (not its timings, log or cache flag)."""
    return r.status, r.reason, r.end, r.report.to_dict() if r.report else None


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    return SimConfig(cache=False, cache_dir=str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def launches(monkeypatch):
    """How many simulator processes ran, and with how many programs each."""
    sizes = []
    real = execute.run_binary

    def counting(cfg, root, binary, workdir, inputs):
        sizes.append(len(inputs))
        return real(cfg, root, binary, workdir, inputs)

    monkeypatch.setattr(batch_mod, "run_binary", counting)
    monkeypatch.setattr(execute, "run_binary", counting)  # what run_solo calls
    return sizes


def one_per_family(tasks):
    seen = {}
    for t in tasks:
        seen.setdefault(t.family, t)
    return list(seen.values())


FAMILIES = one_per_family(load_bundled()) + one_per_family(load_tasks("generated", per_family=1))


@pytest.mark.slow
@pytest.mark.parametrize("task", FAMILIES, ids=[f"{t.source}-{t.family}" for t in FAMILIES])
def test_a_batched_program_gets_exactly_its_solo_result(task, cfg, launches):
    amap = alias_map(task)
    programs = [render("vectors", task, random_program(amap, cycles, seed)) for seed, cycles in
                ((0, 300), (1, 5), (2, 120), (3, 300))]
    programs += ["in0=? x40\n" if amap.inputs else "rst x3\n", "not vectors at all", None, programs[1]]
    together = score_many("vectors", task, programs, cfg)
    assert launches[-1] == 6  # the six parsable programs (the repeat too) in one process
    alone = [score("vectors", task, p, cfg) for p in programs]
    assert [outcome(r) for r in together] == [outcome(r) for r in alone]
    assert [r.status for r in together] == ["ok"] * 5 + ["compile_error", "empty", "ok"]
    assert len({r.overall for r in together[:4]}) > 1  # different programs, different coverage: nothing mixed


TRAP = """module trap(input logic clk, input logic rst_n, input logic [7:0] a, output logic [7:0] q, output logic seen);
  int unsigned sink [];
  integer fd;
  logic [7:0] noise;
  initial begin  // a file left by an earlier program would change this program's coverage
    fd = $fopen("left_behind.txt", "r");
    seen = fd != 0;
    if (fd != 0) $fclose(fd);
    fd = $fopen("left_behind.txt", "w");
    $fclose(fd);
  end
  always_ff @(posedge clk or negedge rst_n)
    if (!rst_n) begin q <= '0; noise <= '0; end
    else begin
      q <= q + a;
      noise <= 8'($urandom);  // the random sequence must restart with each program
      if (noise[2:0] == 3'd5 && q[0]) q <= ~q;
      if (a == 8'hA1) while (a == 8'hA1) q <= q + 1;  // hang: a zero-delay loop
      if (a == 8'hA2) for (int i = 0; i < 200000; i++) $display("flood %0d: the quick brown fox jumps", i);
      if (a == 8'hA3) sink = new[400000000];  // 1.6 GB: over the memory limit at once
    end
endmodule
"""


@pytest.fixture(scope="module")
def trap():
    return Task(id="trap", spec="- `a` (8-bit): operand.\n- `q` (8-bit): sum.\n", rtl={"trap.sv": TRAP},
                top="trap", instance="uut", targets={"overall": 90})


def plain(seed: int) -> str:
    return f"rst x2\nin0=? x{20 + seed}\nin0=0x{seed:x} x3\n"


@pytest.mark.slow
def test_a_hang_a_flood_and_a_crash_cost_only_their_own_results(trap, cfg, launches):
    tight = dataclasses.replace(cfg, run_timeout_s=3.0, output_limit_mb=1, mem_limit_mb=768)
    programs = [plain(1), "rst x2\nin0=0xa1 x2\n", plain(2), "rst x2\nin0=0xa2 x2\n", plain(3),
                "rst x2\nin0=0xa3 x2\n", plain(4), plain(5)]
    together = score_many("vectors", trap, programs, tight)
    sizes = list(launches)
    alone = [score("vectors", trap, p, tight) for p in programs]
    assert [outcome(r) for r in together] == [outcome(r) for r in alone]
    statuses = [r.status for r in together]
    assert statuses == ["ok", "timeout", "ok", "runtime_error", "ok", "runtime_error", "ok", "ok"]
    assert "output limit" in together[3].reason and "signal" in together[5].reason
    # The hang ends its batch as a timeout; the flood and the memory hog are each run again alone
    # (their batches kept the programs before them); the last two share a process.
    assert sizes == [8, 6, 1, 4, 1, 2]


def test_programs_in_one_process_each_start_from_an_empty_directory(trap, cfg, launches):
    together = score_many("vectors", trap, [plain(1), plain(1), plain(1)], cfg)
    assert launches == [3]
    alone = score("vectors", trap, plain(1), cfg)
    assert [outcome(r) for r in together] == [outcome(alone)] * 3
