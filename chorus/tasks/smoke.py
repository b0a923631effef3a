"""A minimal random testbench for any task: checks that a design builds and gives a
random-stimulus coverage baseline. Ports are read by elaborating the RTL with pyslang."""
from __future__ import annotations

import re

from ..sim.design import dut_ports
from .schema import Task

_CLOCK = re.compile(r"(^|_)(clk|clock)($|_)|^i?_?clk", re.I)
_RESET = re.compile(r"(^|_)(rst|reset)(_?n|_b)?($|_)", re.I)


def smoke_testbench(task: Task, cycles: int = 200, seed: int = 1) -> str:
    ports = dut_ports(tuple(sorted(task.rtl.items())), task.top, tuple(sorted(task.defines.items())))
    decls, conns, clocks, resets, drives = [], [], [], [], []
    for p in ports:
        if p.direction == "interface" or p.unpacked:
            continue  # cannot be declared generically; left unconnected
        decls.append(f"  logic [{max(p.width, 1) - 1}:0] {p.name};")
        conns.append(f".{p.name}({p.name})")
        if p.direction != "input":
            continue
        if p.width == 1 and _CLOCK.search(p.name):
            clocks.append(p.name)
        elif p.width == 1 and _RESET.search(p.name):
            resets.append(p.name)
        else:
            drives.append(p.name)
    lines = ["`timescale 1ns/1ps", "module chorus_smoke_tb;", *decls,
             f"  {task.top} {task.instance} ({', '.join(conns)});"]
    for c in clocks:
        lines += [f"  initial {c} = 0;", f"  always #5 {c} = ~{c};"]
    active_low = [r for r in resets if r.lower().endswith(("n", "_b"))]
    lines += ["  initial begin", f"    void'($urandom({seed}));"]
    lines += [f"    {r} = {0 if r in active_low else 1};" for r in resets]
    lines += [f"    {d} = '0;" for d in drives]
    lines += ["    #22;"] + [f"    {r} = {1 if r in active_low else 0};" for r in resets]
    lines += [f"    repeat ({cycles}) begin", "      #10;"]
    lines += [f"      {d} = {{$urandom, $urandom, $urandom, $urandom}};" for d in drives]
    lines += ["    end", "    $finish;", "  end", "endmodule", ""]
    return "\n".join(lines)
