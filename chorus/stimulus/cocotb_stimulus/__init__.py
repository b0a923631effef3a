"""The `cocotb` format: a small Python module of async stimulus functions on the aliases.

A completion looks like this (`render` emits the same shape):

    import random
    from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge, Timer

    async def stimulus(dut):
        dut.in0.value = 5                # drive inputs by alias, values within the alias width
        await FallingEdge(dut.clk)       # inputs change on the falling edge, sampled on the rising
        for _ in range(100):
            dut.in1.value = random.getrandbits(8)
            await FallingEdge(dut.clk)
        if dut.out0.value == 1:          # outputs can be read
            await ClockCycles(dut.clk, 10, rising=False)

- `dut` is `chorus_cocotb_top`, a wrapper whose ports are the aliases (clk, rst/rst_n, in*,
  out*) around the DUT instance; nothing inside the DUT is visible through VPI.
- chorus, not the stimulus, starts the clock (10 ns, low at time 0, as in the body skeleton)
  and holds the reset for `reset_cycles` falling edges. Then every top-level
  `async def stimulus*(dut)` (or `@cocotb.test()` function: the decorator is ignored) is
  awaited in source order, starting at a falling edge, with `random` seeded by `seed`.
- The run ends when the last function returns (so await an edge after the last writes), at
  max_time_ns of simulated time, or at an exception; coverage so far is scored in every case.
- Stimulus drives in*, rst/rst_n by `.value =`; never clk, outputs or a Clock of its own.
- Imports: random, math, cocotb and its public submodules (triggers, clock, types, handle,
  utils, queue, task, result, simtime). The module is checked with `ast` before it runs: no
  other imports, no `_names` or `_attributes`, no reflection or I/O builtins, no classes. It
  then runs, with restricted builtins, in a locked-down process of its own that can write no
  file, open no socket and signal nobody (child/), never in the simulator.

The DUT and wrapper are built once per design with cocotb's own Verilator main
(share/lib/verilator/verilator.cpp) and VPI library, cached on disk; each evaluation runs that
binary in a fresh directory, with chorus's harness as the only cocotb test module.
"""
from __future__ import annotations

from ...core.task import Task
from ...sim.config import SimConfig
from ...sim.result import SimResult
from ..aliases import alias_map
from .check import check_stimulus
from .render import render
from .run import run_cocotb


def score(task: Task, completion: str | None, cfg: SimConfig, opts: dict) -> SimResult:
    text = completion or ""
    if not text.strip():
        return SimResult("empty", "empty stimulus module; nothing was simulated")
    problem = check_stimulus(text, alias_map(task))
    return problem or run_cocotb(task, text, cfg, opts)


__all__ = ["check_stimulus", "render", "run_cocotb", "score"]
