"""A minimal random testbench for any task: checks that a design builds and gives a
random-stimulus coverage baseline. It is the body skeleton (ports read by elaborating the RTL
with pyslang, wired through the canonical aliases) around uniform random stimulus."""
from __future__ import annotations

from ..core.task import Task
from ..stimulus.aliases import alias_map
from ..stimulus.program import RANDOM, Program, Step
from ..stimulus.skeleton import body_testbench, render_body


def smoke_testbench(task: Task, cycles: int = 200) -> str:
    """One reset, then every data input random on each of `cycles` cycles (a compact SV loop)."""
    amap = alias_map(task)
    steps = [Step((), 2, True)] if amap.reset else []
    steps.append(Step(tuple((a.alias, RANDOM) for a in amap.inputs), cycles, False))
    return body_testbench(task, amap, render_body(Program(steps), amap))
