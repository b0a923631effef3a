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

import signal
from dataclasses import dataclass
from pathlib import Path

from . import checker
from .build import build_jail, define_args, verilator_errors
from .config import SimConfig
from .process import run_limited
from . import json_tree
from .dut_parameters import override_problem
from .toolchain import WARNING_FLAGS, Toolchain
from .tree_verdict import AstVerdict



def json_only_command(tc: Toolchain, cfg: SimConfig, ast_dir: Path, top: str, defines: dict[str, str],
                      sources: list[str]) -> list[str]:
    """Verilator's elaborated parse tree of `sources` into `ast_dir` (read with load_tree)."""
    return [str(tc.verilator), "--json-only", "--timing", "--timescale", "1ns/1ps", *WARNING_FLAGS,
            *cfg.extra_verilator_flags, "--top-module", top, "--Mdir", str(ast_dir), "--prefix", "Vast",
            *define_args(defines), *sources]


def load_tree(ast_dir: Path) -> tuple[dict, dict]:
    """The tree and its file table (letter -> filename, realpath) from a json_only_command run."""
    tree = json_tree.loads((ast_dir / "Vast.tree.json").read_text(encoding="utf-8", errors="replace"))
    files = json_tree.loads((ast_dir / "Vast.tree.meta.json").read_text(encoding="utf-8", errors="replace"))
    return tree, files.get("files", {})


@dataclass(frozen=True)
class DutSpec:
    """What the DUT's instances are checked against: the task's top module, its SystemVerilog
    files, and the design as stated (design_check.StatedDesign: its parameters)."""
    top: str
    sources: frozenset
    stated: object


def check_ast(tc: Toolchain, cfg: SimConfig, cache_root: Path, workdir: Path, sources: list[str], top: str,
              defines: dict[str, str], design_units: set[str], trusted_rtl: bool,
              allow_dut_writes: bool = False, dut: DutSpec | None = None,
              deadline: checker.Deadline | None = None) -> AstVerdict:
    """Verilator's parse of `sources` (jailed), its tree read and judged in a child under the check
    budget (checker.judge_tree), both before `deadline` (default: simulator.check_timeout_s from
    now); cached by the sources' content. With `dut`, every instance of the DUT must be the design
    as the task states it (dut_parameters: the child returns the instances' signatures, the stated
    design's are elaborated here)."""
    design, out = workdir / "design", workdir / "out"
    key = (tc.version, [(s, (design / s).read_text(errors="replace")) for s in sources], top, sorted(defines.items()),
           sorted(design_units), trusted_rtl, allow_dut_writes, list(cfg.extra_verilator_flags),
           (dut.top, sorted(dut.sources)) if dut else None)
    if (hit := checker.recall("ast", key, cfg)) is not None:
        return _as_specified(AstVerdict(hit["status"], hit["reason"]), hit.get("duts"), dut)
    deadline = deadline or checker.Deadline(cfg.check_timeout_s)
    if deadline.passed:
        return AstVerdict("over_budget", deadline.reason)
    ast_dir = workdir / "ast"
    ast_dir.mkdir(exist_ok=True)
    cmd = json_only_command(tc, cfg, ast_dir, top, defines, sources)
    tree_mb = tree_limit_mb(cfg)
    r = run_limited(cmd, cwd=design, env=tc.env(), timeout_s=min(deadline.left(), cfg.build_timeout_s),
                    log_path=out / "ast.log", mem_mb=cfg.mem_limit_mb, file_mb=tree_mb,
                    jail=build_jail(cfg, cache_root, (design,), (ast_dir,)))
    if r.setup_error:
        return AstVerdict("setup", f"isolation could not be set up: {r.setup_error}")
    if r.timed_out:
        return _remember(key, cfg, AstVerdict("over_budget", deadline.reason + " (in Verilator's parse)", r.log))
    if r.signal == signal.SIGXFSZ or _size(ast_dir / "Vast.tree.json") >= tree_mb << 20:
        # Verilator catches SIGXFSZ and exits with an error of its own: the file at its limit says it
        return _remember(key, cfg, AstVerdict("over_budget", f"Verilator's parse tree is over "
                                              f"{tree_mb} MB (an eighth of simulator.check_mem_mb="
                                              f"{cfg.check_mem_mb} MB)", r.log))
    if r.signal is not None or r.returncode != 0:
        errors = verilator_errors(r.log)
        why = errors[0][:300] if errors else f"Verilator stopped (exit {r.returncode}, signal {r.signal})"
        return AstVerdict("compile_error", why, r.log)
    std_file = str((tc.root / "include" / "verilated_std.sv").resolve())
    answer = checker.run_check("judge_tree", {"tree": str(ast_dir / "Vast.tree.json"),
                                              "meta": str(ast_dir / "Vast.tree.meta.json"),
                                              "design_units": sorted(design_units), "trusted_rtl": trusted_rtl,
                                              "allow_dut_writes": allow_dut_writes, "std_file": std_file,
                                              "dut": [dut.top, sorted(dut.sources)] if dut else None},
                               cfg, out, deadline=deadline)
    if "over_budget" in answer:
        return _remember(key, cfg, AstVerdict("over_budget", "reading Verilator's parse tree: " + answer["over_budget"],
                                              r.log))
    verdict = _remember(key, cfg, AstVerdict(answer["status"], answer["reason"],
                                             r.log if answer["status"] != "ok" else ""), answer.get("duts"))
    return _as_specified(verdict, answer.get("duts"), dut)


def tree_limit_mb(cfg: SimConfig) -> int:
    """The largest parse tree Verilator may write. The tree is read into memory and walked, at about
    six times its size (measured: a 10.9 MB tree grew the reader by 61 MB), so a tree past an eighth of
    the reader's budget could not be judged: Verilator stops at this size instead of the reader
    failing after seconds of work."""
    return max(16, cfg.check_mem_mb // 8)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _remember(key, cfg: SimConfig, verdict: AstVerdict, duts: list | None = None) -> AstVerdict:
    checker.remember("ast", key, cfg, {"status": verdict.status, "reason": verdict.reason, "duts": duts})
    return verdict


def _as_specified(verdict: AstVerdict, duts: list | None, dut: DutSpec | None) -> AstVerdict:
    """The verdict, refused when an instance of the DUT is not the design as the task states it."""
    if verdict.status != "ok" or dut is None or duts is None:
        return verdict
    found = [(where, _tuples(sig)) for where, sig in duts]
    if why := override_problem(found, dut.stated.texts, dut.stated.reference, dut.top):
        return AstVerdict("rejected", why)
    return verdict


def _tuples(x):
    """A signature back from JSON: lists to tuples, so it compares equal to one computed here."""
    return tuple(_tuples(v) for v in x) if isinstance(x, list) else x
