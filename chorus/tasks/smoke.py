"""A minimal random testbench for any task: checks that a design builds and gives a
random-stimulus coverage baseline. It is the body skeleton (ports read by elaborating the RTL
with pyslang, wired through the canonical aliases) around uniform random stimulus."""
from __future__ import annotations

from ..stimulus.aliases import alias_map
from ..stimulus.program import random_program
from ..stimulus.skeleton import body_testbench, render_body
from .schema import Task


def smoke_testbench(task: Task, cycles: int = 200, seed: int = 1) -> str:
    amap = alias_map(task)
    program = random_program(amap, cycles, seed, reset_rate=0.0)  # one reset at the start only
    return body_testbench(task, amap, render_body(program, amap))
