"""A stimulus program rendered as a cocotb module (scores like the same program as vectors)."""
from __future__ import annotations

from ...core.task import Task
from ..aliases import alias_map
from ..program import RANDOM, Program


def render(task: Task, program: Program, opts: dict) -> str:
    """The program as a stimulus module; scores like the same program in the vectors format."""
    amap = alias_map(task)
    r = amap.reset
    body = []
    for i, s in enumerate(program.steps):
        reset = bool(r) and (s.reset or any(a == r.alias and v == amap.reset_active for a, v in s.assigns))
        assigns = [(a, v) for a, v in s.assigns if not (r and a == r.alias)]  # the reset is a level per step
        if reset:
            body.append(f"dut.{r.alias}.value = {amap.reset_active}")
        body += [f"dut.{a}.value = {hex(v)}" for a, v in assigns if v is not RANDOM]
        rand = [f"dut.{a}.value = random.getrandbits({amap.drivable[a].width})" for a, v in assigns if v is RANDOM]
        if rand:
            body += [f"for _ in range({s.cycles}):", *(f"    {x}" for x in rand), "    await FallingEdge(dut.clk)"]
        elif s.cycles == 1:
            body.append("await FallingEdge(dut.clk)")
        else:
            body.append(f"await ClockCycles(dut.clk, {s.cycles}, rising=False)")
        if reset and i < len(program.steps) - 1:
            body.append(f"dut.{r.alias}.value = {1 - amap.reset_active}")
    imports = (["import random", ""] if any("random." in x for x in body) else [])
    lines = [*imports, "from cocotb.triggers import ClockCycles, FallingEdge", "", "",
             "async def stimulus(dut):", *(f"    {x}" for x in body or ["await FallingEdge(dut.clk)"])]
    return "\n".join(lines) + "\n"
