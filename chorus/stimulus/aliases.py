"""Canonical port aliases: clk, rst/rst_n, in0..inN, out0..outM for any design.

A tiny model cannot copy design-specific port names, so the body, vectors and cocotb formats
speak in aliases that chorus wires to the real ports. Ports come from elaborating the RTL
with pyslang; the descriptions come from the spec line that names each port.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from ..core.task import Task
from ..sim.design import dut_ports

_CLOCK = re.compile(r"^(i_|in_)?(clk|clock)(_i|_in)?$|^(clk|clock)_\w+$|^\w+_(clk|clock)$", re.I)
_RESET = re.compile(r"(^|_)(rst|reset|arst|srst)(n|_n|_b|_l|_ni)?($|_)|^(n_?rst|rstn|resetn)", re.I)
ALIAS_NAME = re.compile(r"^(in\d+|out\d+|rst|rst_n|clk)$")  # what any alias looks like
_ACTIVE_LOW = re.compile(r"(_n|_b|_l|_ni|n)$|^n_?rst|rstn|resetn", re.I)


@dataclass(frozen=True)
class Alias:
    alias: str  # clk | rst | rst_n | in<k> | out<k>
    port: str  # real port name on the DUT
    direction: str  # input | output
    width: int
    description: str = ""


@dataclass(frozen=True)
class AliasMap:
    clock: Alias | None
    reset: Alias | None
    inputs: tuple[Alias, ...]
    outputs: tuple[Alias, ...]
    unmapped: tuple[str, ...] = ()  # ports no alias can carry (interfaces, unpacked arrays)

    @property
    def all(self) -> tuple[Alias, ...]:
        return tuple(a for a in (self.clock, self.reset) if a) + self.inputs + self.outputs

    @property
    def drivable(self) -> dict[str, Alias]:
        """Aliases stimulus may assign: the reset and the data inputs (the clock is chorus's)."""
        return {a.alias: a for a in ((self.reset,) if self.reset else ()) + self.inputs}

    @property
    def reset_active(self) -> int:
        return 0 if self.reset and self.reset.alias == "rst_n" else 1


def _describe(port: str, texts: list[str]) -> str:
    """The spec line that introduces `port`: a list or table row starting with it, else any mention."""
    name = re.escape(port)
    entry = re.compile(rf"^\s*(?:[-*+]|\d+\.|\|)?\s*\**`?{name}`?\**\s*(?:[(\[:|-]|\s-)")
    mention = re.compile(rf"`{name}`")
    lines = [ln for text in texts for ln in text.splitlines()]
    for pat in (entry, mention):
        for line in lines:
            if pat.search(line):
                return re.sub(r"\s+", " ", line.strip(" -*|\t"))[:160]
    return ""


@functools.lru_cache(maxsize=1024)
def _alias_map(files: tuple, top: str, defines: tuple, texts: tuple[str, ...], parameters: tuple = ()) -> AliasMap:
    clock = reset = None
    inputs, outputs, unmapped = [], [], []
    for p in dut_ports(files, top, defines, parameters):
        if p.direction not in ("input", "output") or p.unpacked:
            unmapped.append(p.name)
            continue
        desc = _describe(p.name, list(texts))
        if p.direction == "output":
            outputs.append(Alias(f"out{len(outputs)}", p.name, "output", p.width, desc))
        elif clock is None and p.width == 1 and _CLOCK.search(p.name):
            clock = Alias("clk", p.name, "input", 1, desc)
        elif reset is None and p.width == 1 and _RESET.search(p.name):
            reset = Alias("rst_n" if _ACTIVE_LOW.search(p.name) else "rst", p.name, "input", 1, desc)
        else:
            inputs.append(Alias(f"in{len(inputs)}", p.name, "input", p.width, desc))
    return AliasMap(clock, reset, tuple(inputs), tuple(outputs), tuple(unmapped))


def alias_map(task: Task) -> AliasMap:
    texts = (task.spec, *task.spec_files.values())
    return _alias_map(tuple(sorted(task.rtl.items())), task.top, tuple(sorted(task.defines.items())), texts,
                      task.stated_parameters)


def alias_table(amap: AliasMap, descriptions: bool = True) -> str:
    """The prompt's view of the ports: alias, width, direction, real name and (unless left out to
    save tokens) the spec's description."""
    def row(*cells: str) -> str:
        return " | ".join(cells if descriptions else cells[:4])

    rows = [row("alias", "width", "dir", "port", "description")]
    if amap.clock is None:
        rows.append(row("clk", "1", "input", "(none)", "pacing clock only: the design has no clock"))
    for a in amap.all:
        rows.append(row(a.alias, str(a.width), a.direction, a.port, a.description))
    if amap.reset:
        rows.append(f"(reset is active {'low' if amap.reset_active == 0 else 'high'})")
    return "\n".join(rows)
