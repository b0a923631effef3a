"""The last word on safety: Verilator's own parse tree of the design and the testbench.

safety.py checks the preprocessed testbench with pyslang, which gives fast, well-worded answers;
but two lexers can disagree (Verilator ends an attribute `(* .. *)` at the first `*)`, even
inside a string, where pyslang sees one string literal). So before the build, Verilator itself
parses exactly what it will compile (`--json-only`, jailed) and chorus walks that tree:

- host code: $system/$c nodes (SYSTEMT, SYSTEMF, CSTMTUSER, CEXPRUSER), `systemc_* sections and
  DPI imports/exports, anywhere but in Verilator's own `std` package. In the testbench they are
  `rejected`; in the task's RTL they are a task error unless the tasks are trusted.
- the DUT's boundary: testbench code reaches the DUT only through its ports. Verilator has linked
  every reference to what it names (variable, subroutine, interface instance), so the rules in
  `judge` hold however a reference was spelt: a write to design state, a call into the DUT, a
  handle on an interface inside it, a write to what the DUT drives (an interface signal, or the
  net on a DUT output, by a procedural write or a second driver).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .build import build_jail, define_args, verilator_errors
from .config import SimConfig
from .process import run_limited
from .dut_boundary import breach
from .toolchain import WARNING_FLAGS, Toolchain
from .verilator_tree import loads, walk



@dataclass
class AstVerdict:
    status: str = "ok"  # ok | rejected | task_error | compile_error | setup
    reason: str = ""
    log: str = ""


def check_ast(tc: Toolchain, cfg: SimConfig, cache_root: Path, workdir: Path, sources: list[str], top: str,
              defines: dict[str, str], design_units: set[str], trusted_rtl: bool,
              allow_dut_writes: bool = False) -> AstVerdict:
    design, out = workdir / "design", workdir / "out"
    ast_dir = workdir / "ast"
    ast_dir.mkdir(exist_ok=True)
    cmd = [str(tc.verilator), "--json-only", "--timing", "--timescale", "1ns/1ps", *WARNING_FLAGS,
           *cfg.extra_verilator_flags, "--top-module", top, "--Mdir", str(ast_dir), "--prefix", "Vast",
           *define_args(defines), *sources]
    r = run_limited(cmd, cwd=design, env=tc.env(), timeout_s=cfg.build_timeout_s, log_path=out / "ast.log",
                    mem_mb=cfg.mem_limit_mb, file_mb=512, jail=build_jail(cfg, cache_root, (design,), (ast_dir,)))
    if r.setup_error:
        return AstVerdict("setup", f"isolation could not be set up: {r.setup_error}")
    if r.timed_out or r.signal is not None or r.returncode != 0:
        errors = verilator_errors(r.log)
        why = errors[0][:300] if errors else ("Verilator did not finish" if r.timed_out else
                                              f"Verilator stopped (exit {r.returncode}, signal {r.signal})")
        return AstVerdict("compile_error", why, r.log)
    try:
        tree = loads((ast_dir / "Vast.tree.json").read_text(encoding="utf-8", errors="replace"))
        files = loads((ast_dir / "Vast.tree.meta.json").read_text(encoding="utf-8",
                                                                                 errors="replace")).get("files", {})
    except (OSError, ValueError) as exc:
        return AstVerdict("compile_error", f"Verilator's parse tree is unreadable: {exc}", r.log)
    std_file = str((tc.root / "include" / "verilated_std.sv").resolve())
    return judge(tree, files, design_units, trusted_rtl, allow_dut_writes, std_file)


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
