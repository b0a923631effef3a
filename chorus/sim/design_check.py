"""The task's own files: how they are staged for Verilator (`stage_design`: only SystemVerilog
sources are ever compiled), and verdicts on its RTL, each cached per design.

- `rtl_host_code`: does the RTL reach the host ($c, $system, DPI, `systemc sections)? Asked before
  every build of the design (a testbench's, the vectors harness's, the cocotb wrapper's): untrusted
  RTL that does is a task error, never built.
- `rtl_check_problem`: can Verilator's tree of the RTL alone be made, read and walked within the
  check budget (simulator.check_timeout_s / check_mem_mb)? Asked only when a testbench's check
  goes over it: if the RTL alone does too, no sample can pass, and the task is at fault.
- `design_problem`: does the RTL compile on its own? Asked only when a testbench's build fails, to
  decide whose fault it is: the testbench's (compile_error) or the task's (harness_error). Text in
  the build log cannot decide it, because the testbench controls much of that text.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..core.task import TRUSTED, Task
from .result import SimResult
from .build import build_jail, define_args, verilator_errors, verilator_flags
from .config import SimConfig
from .design import source_name
from .process import run_limited
from .toolchain import Toolchain
from .workdirs import new_workdir

MAX_RTL_MB = 16
_KNOWN: dict[str, str | None] = {}
_HOST: dict[str, str | None] = {}
_CHECKABLE: dict[str, str | None] = {}
SV_SUFFIXES = (".sv", ".v", ".svh", ".vh")  # the only task files ever handed to Verilator


def untrusted_rtl(task: Task, what: str) -> SimResult:
    return SimResult("harness_error", f"task {task.id}: its RTL {what}; set tasks.trusted=true only for RTL "
                     "you trust (it would run as host code)")


def _design_key(task: Task, tc: Toolchain) -> str:
    return hashlib.sha256(repr((sorted(task.rtl.items()), sorted(task.defines.items()), task.top,
                               tc.version)).encode()).hexdigest()


def rtl_host_code(task: Task, tc: Toolchain, cfg: SimConfig, cache_root: Path) -> SimResult | None:
    """The task error for untrusted RTL that reaches the host, else None (also for trusted RTL).
    Decided on Verilator's own preprocessing of the RTL, read by pyslang (safety.design_units):
    pasted or included host code is seen as Verilator will compile it."""
    if task.meta.get(TRUSTED):
        return None
    key = _design_key(task, tc)
    if key not in _HOST:
        _HOST[key] = _host_code(task, tc, cfg, cache_root)
    return untrusted_rtl(task, _HOST[key]) if _HOST[key] else None


def safe_relpath(name: str) -> str | None:
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        return None
    return str(p)


def stage_design(task: Task, design: Path) -> list[str] | SimResult:
    """Write the task's files under `design`; returns the relative paths of its SystemVerilog sources,
    the only ones handed to Verilator (a .cpp, .c or .vlt among them would be compiled or obeyed as
    host code or Verilator configuration). Other files stay readable, e.g. for $readmemh."""
    sources = []
    for name, text in task.rtl.items():
        rel = safe_relpath(name)
        if rel is None:
            return SimResult("harness_error", f"task {task.id}: RTL file name {name!r} is not a relative path")
        (design / rel).parent.mkdir(parents=True, exist_ok=True)
        (design / rel).write_text(text)
        if is_sv_source(rel):
            sources.append(rel)
    if not sources:
        return SimResult("harness_error", f"task {task.id}: no SystemVerilog source among its files "
                         f"({', '.join(SV_SUFFIXES)})")
    return sources


def is_sv_source(name: str) -> bool:
    return name.lower().endswith(SV_SUFFIXES)


def design_sources(task: Task) -> frozenset[str]:
    """The task's SystemVerilog files, spelt as coverage points name them: the only sources whose
    points can be the design's. The testbench cannot add to them: it is written under another
    name (testbench_path), and every `line marker in it names its own file (preprocess)."""
    return frozenset(source_name(rel) for name in task.rtl if (rel := safe_relpath(name)) and is_sv_source(rel))


def testbench_path(task: Task) -> str:
    """Where the testbench is written: verif/<its name>, as in CVDP, and never over a task file (its
    points would then be counted as the design's)."""
    name = PurePosixPath(safe_relpath(task.tb_name) or "tb.sv").name
    taken = {source_name(n) for n in task.rtl}
    path = f"verif/{name}"
    while source_name(path) in taken:
        name = f"chorus_{name}"
        path = f"verif/{name}"
    return path


@contextmanager
def _staged(task: Task, kind: str):
    """(work dir, design dir, source paths or the SimResult that stage_design refused with); removed after."""
    workdir = new_workdir(kind)
    try:
        design = workdir / "design"
        design.mkdir()
        yield workdir, design, stage_design(task, design)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _host_code(task: Task, tc: Toolchain, cfg: SimConfig, cache_root: Path) -> str | None:
    from . import safety

    with _staged(task, "rtlcheck") as (workdir, design, sources):
        if not isinstance(sources, list):
            return None  # not buildable at all: the build itself reports it
        cmd = [str(tc.verilator), "-E", *define_args(task.defines), *sources]
        r = run_limited(cmd, cwd=design, env=tc.env(), timeout_s=min(60.0, cfg.build_timeout_s),
                        log_path=workdir / "pre.log", mem_mb=cfg.mem_limit_mb, file_mb=64 + (MAX_RTL_MB << 2),
                        stdout_path=workdir / "rtl.sv", jail=build_jail(cfg, cache_root, (design,), ()))
        if r.setup_error or r.timed_out or r.signal is not None or r.returncode != 0:
            return None  # the build fails the same way and says why
        return safety.design_units(safety.parse((workdir / "rtl.sv").read_text(errors="replace"), "rtl")).host_access


def rtl_too_large(task: Task) -> str | None:
    size = sum(len(t) for t in task.rtl.values())
    if size > MAX_RTL_MB << 20:
        return f"task {task.id}: its RTL is {size >> 20} MB, over {MAX_RTL_MB} MB (a task error, not the testbench's)"
    return None


def design_problem(task: Task, tc: Toolchain, cfg: SimConfig, cache_root: Path) -> str | None:
    """None when the RTL lints cleanly with Verilator, else a one-line task error."""
    if too_large := rtl_too_large(task):
        return too_large
    key = _design_key(task, tc)
    if key not in _KNOWN:
        _KNOWN[key] = _lint(task, tc, cfg, cache_root)
    return _KNOWN[key]


_ELABORATED: dict[tuple, "dict | str"] = {}


@dataclass(frozen=True)
class StatedDesign:
    """The design as the task states it (dut_parameters.override_problem reads it): what each allowed
    value of each named parameter elaborates to, and the signature of the design at an assignment."""
    texts: dict
    task: Task
    tc: Toolchain
    cfg: SimConfig
    cache_root: Path

    def reference(self, assignment: tuple[tuple[str, str], ...]) -> tuple | str:
        found = _elaborate(self.task, self.tc, self.cfg, self.cache_root, (dict(assignment),))
        return found if isinstance(found, str) else found["chorus_dut_0"]


def stated_design(task: Task, tc: Toolchain, cfg: SimConfig, cache_root: Path) -> StatedDesign | SimResult:
    """What the DUT's instances are checked against, from Verilator elaborating the design alone at
    each value the task allows; or the task error that stops every sample (said once per design
    and process: elaborations are cached)."""
    from . import dut_parameters

    allowed = dut_parameters.allowed_values(task)
    if isinstance(allowed, str):
        return SimResult("harness_error", allowed)
    cells = dut_parameters.value_cells(allowed)
    found = _elaborate(task, tc, cfg, cache_root, tuple(c for _, c in cells))
    if isinstance(found, str):
        return SimResult("harness_error", found)
    texts: dict[str, dict[str, str]] = {name: {} for name in allowed}
    for i, (varied, assignment) in enumerate(cells):
        params = dict(found[f"chorus_dut_{i}"][0])
        for name in ([varied] if varied else allowed):
            if name not in params:
                return SimResult("harness_error", f"task {task.id}: {task.top} has no parameter {name}")
            texts[name].setdefault(params[name], assignment[name])
    return StatedDesign(texts, task, tc, cfg, cache_root)


def _elaborate(task: Task, tc: Toolchain, cfg: SimConfig, cache_root: Path, cells: tuple[dict, ...]) -> dict | str:
    key = (_design_key(task, tc), json.dumps(cells, sort_keys=True))
    if key not in _ELABORATED:
        _ELABORATED[key] = _elaborate_uncached(task, tc, cfg, cache_root, list(cells))
    return _ELABORATED[key]


def _elaborate_uncached(task: Task, tc: Toolchain, cfg: SimConfig, cache_root: Path, cells: list[dict]) -> dict | str:
    """Instance name -> signature of the DUT elaborated alone once per assignment in `cells`."""
    from . import dut_parameters
    from .design import PortError, dut_ports
    from .verilator_ast import json_only_command, load_tree

    try:
        ports = dut_ports(tuple(sorted(task.rtl.items())), task.top, tuple(sorted(task.defines.items())),
                          task.stated_parameters)
    except PortError as exc:
        return f"task {task.id}: {exc}"
    top = dut_parameters.REFERENCE_TOP
    with _staged(task, "params") as (workdir, design, sources):
        if not isinstance(sources, list):
            return sources.reason
        (design / f"{top}.sv").write_text(dut_parameters.reference_wrapper(task, cells, ports))
        ast_dir = workdir / "ast"
        ast_dir.mkdir()
        cmd = json_only_command(tc, cfg, ast_dir, top, task.defines, [*sources, f"{top}.sv"])
        r = run_limited(cmd, cwd=design, env=tc.env(), timeout_s=cfg.build_timeout_s, log_path=workdir / "ast.log",
                        mem_mb=cfg.mem_limit_mb, file_mb=512, jail=build_jail(cfg, cache_root, (design,), (ast_dir,)))
        if failed := _verilator_failure(r, task, "does not elaborate at the parameters it states"):
            return failed
        try:
            tree, files = load_tree(ast_dir)
        except (OSError, ValueError) as exc:
            return f"task {task.id}: Verilator's elaboration of its RTL is unreadable: {exc}"
        found = dut_parameters.cell_signatures(tree, files, task, design_sources(task))
        if len(found) != len(cells):
            return f"task {task.id}: Verilator's elaboration of its RTL lost instances of {task.top}"
        return found


LINT_TOP = "chorus_lint_top"


def _lint_wrapper(task: Task) -> str | None:
    """A top that gives each interface port of the DUT an interface instance, or None when it has
    none: Verilator refuses interface ports on its top module, so such a design would otherwise
    always fail its own lint, and every testbench compile error would be blamed on the task."""
    from .design import PortError, dut_ports

    try:
        ports = dut_ports(tuple(sorted(task.rtl.items())), task.top, tuple(sorted(task.defines.items())),
                          task.stated_parameters)
    except PortError:
        return None
    ifaces = [p for p in ports if p.direction == "interface"]
    if not ifaces:
        return None
    decls = "".join(f"  {p.type} chorus_{p.name}();\n" for p in ifaces)
    pins = ", ".join(f".{p.name}(chorus_{p.name})" for p in ifaces)
    return f"module {LINT_TOP};\n{decls}  {task.top} dut({pins});\nendmodule\n"


def _lint(task: Task, tc: Toolchain, cfg: SimConfig, cache_root: Path) -> str | None:
    with _staged(task, "lint") as (workdir, design, sources):
        if not isinstance(sources, list):
            return sources.reason
        top, wrapper = task.top, _lint_wrapper(task)
        if wrapper is not None:
            (design / f"{LINT_TOP}.sv").write_text(wrapper)
            top, sources = LINT_TOP, [*sources, f"{LINT_TOP}.sv"]
        flags = [f for f in verilator_flags(cfg) if f not in ("--cc", "--exe")]
        cmd = [str(tc.verilator), "--lint-only", *flags, "--top-module", top,
               *define_args(task.defines), *sources]
        r = run_limited(cmd, cwd=design, env=tc.env(), timeout_s=cfg.build_timeout_s, log_path=workdir / "lint.log",
                        mem_mb=cfg.mem_limit_mb, file_mb=64, jail=build_jail(cfg, cache_root, (design,), ()))
        return _verilator_failure(r, task, "does not compile on its own")


def _verilator_failure(r, task: Task, what: str) -> str | None:
    """The one-line task error of a Verilator run over the task's RTL alone, or None when it passed."""
    if r.setup_error:
        return f"isolation could not be set up: {r.setup_error}"
    if r.timed_out or r.signal is not None or r.returncode != 0:
        errors = verilator_errors(r.log)
        why = errors[0][:300] if errors else f"Verilator exit {r.returncode}, signal {r.signal}"
        return f"task {task.id}: its RTL {what}: {why}"
    return None


def rtl_check_problem(task: Task, tc: Toolchain, cfg: SimConfig, cache_root: Path) -> str | None:
    """None when the RTL alone passes Verilator's tree check within the check budget, else a one-line
    task error (cached per design and budget)."""
    key = f"{_design_key(task, tc)}:{cfg.check_timeout_s}:{cfg.check_mem_mb}"
    if key not in _CHECKABLE:
        _CHECKABLE[key] = _tree_check(task, tc, cfg, cache_root)
    return _CHECKABLE[key]


def _tree_check(task: Task, tc: Toolchain, cfg: SimConfig, cache_root: Path) -> str | None:
    from .verilator_ast import check_ast

    with _staged(task, "treecheck") as (workdir, design, sources):
        if not isinstance(sources, list):
            return sources.reason
        (workdir / "out").mkdir()
        top, wrapper = task.top, _lint_wrapper(task)
        if wrapper is not None:
            (design / f"{LINT_TOP}.sv").write_text(wrapper)
            top, sources = LINT_TOP, [*sources, f"{LINT_TOP}.sv"]
        v = check_ast(tc, cfg, cache_root, workdir, sources, top, task.defines, set(), trusted_rtl=True,
                      allow_dut_writes=True)
        if v.status == "over_budget" or v.reason.startswith("Verilator's parse tree is unreadable"):
            return f"task {task.id}: its RTL alone cannot be checked: {v.reason} (a task error, not the testbench's)"
        return None
