"""The verdict on Verilator's parse tree of the design and the testbench (verilator_ast.py runs
Verilator; the bounded checker child reads the tree and calls `judge` here). Pure: no simulator,
no child processes, so the child imports it without importing the code that starts it."""
from __future__ import annotations

import re
from dataclasses import dataclass

from .dut_boundary import breach
from .verilator_tree import walk


@dataclass
class AstVerdict:
    status: str = "ok"  # ok | rejected | task_error | compile_error | over_budget | setup
    reason: str = ""
    log: str = ""


def judge(tree: dict, files: dict, design_units: set[str], trusted_rtl: bool,
          allow_dut_writes: bool = False, std_file: str | None = None) -> AstVerdict:
    """Walk the tree once (verilator_tree.walk), then decide (testbench code: scope not a design unit):

    - host code anywhere but in Verilator's own `std` package (its mailbox, semaphore and process
      use $c; the testbench cannot add code there: a second `std` package does not elaborate);
    - instance and block names with a dot, bracket or space, which would read as extra hierarchy
      levels in coverage paths (`\\uut.pad ` would put its instances under the DUT);
    - and, unless simulator.allow_dut_writes, anything that reaches the DUT other than through its
      ports (dut_boundary.breach). Reads of DUT internals stay allowed (white-box checks)."""
    seen = walk(tree, files, std_file)
    for scope, what, where in seen.host:
        if scope in design_units:
            if not trusted_rtl:
                return AstVerdict("task_error", f"uses {what} ({where})")
        else:
            return AstVerdict("rejected", f"{where}: {what} is not allowed (host code; found in Verilator's own "
                              "parse of the testbench)")
    for scope, name, _, where in seen.cells:
        if scope not in design_units and any(c in name for c in ".[] "):
            return AstVerdict("rejected", f"{where}: instance name {name!r} would be read as a hierarchy path; "
                              "use a plain identifier")
    for scope, name, where in seen.blocks:
        if scope not in design_units and any(c in _BLOCK_INDEX.sub("", name) for c in ".[] "):
            return AstVerdict("rejected", f"{where}: block name {name!r} would be read as a hierarchy path; "
                              "use a plain identifier")
    if allow_dut_writes:
        return AstVerdict()
    why = breach(seen, design_units)
    return AstVerdict("rejected", f"{why}; drive the DUT through its ports instead (reading internals is fine; "
                      "simulator.allow_dut_writes=true permits it)") if why else AstVerdict()


_BLOCK_INDEX = re.compile(r"(\[\d+\])+$")  # Verilator names a generate loop's blocks blk[0], blk[1], ...
