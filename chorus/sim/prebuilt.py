"""Build a harness once per design, then run it many times with stimulus given as data.

The vectors format (and any other data-driven harness) compiles its SystemVerilog harness
with the DUT a single time; each evaluation only writes input files into a fresh run
directory and executes the cached binary, which costs milliseconds instead of a build.
"""
from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import shutil
import time
from pathlib import Path
from typing import Callable

from ..core.task import TRUSTED, Task
from .build import build, build_fingerprint
from .cache import ResultCache, default_cache_root
from .config import SimConfig
from .result import SimResult
from .runtime import RuntimeBuildError
from .batch import run_programs
from .execute import score_run
from .design_check import rtl_host_code, stage_design, untrusted_rtl
from .simulate import task_facts
from .verilator_ast import check_ast
from .svlex import top_modules
from .toolchain import ToolchainError, find_toolchain
from .workdirs import new_workdir

HARNESS_FILE = "verif/chorus_harness.sv"
_FAILED: dict[str, SimResult] = {}  # harness builds that failed in this process, by key


def harness_key(task: Task, harness_sv: str, cfg: SimConfig, version: str) -> str:
    h = hashlib.sha256()
    for part in (sorted(task.rtl.items()), sorted(task.defines.items()), task.top, harness_sv,
                 build_fingerprint(cfg), version):
        h.update(repr(part).encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def cached_binary(subdir: str, key: str, cfg: SimConfig,
                  build_into: Callable[[Path], SimResult | None]) -> tuple[Path | None, SimResult | None]:
    """The binary cached under <cache>/<subdir>/<key>/sim, built once under a file lock by
    `build_into(binary)`; a failed build is remembered for this process and returned again."""
    binary = default_cache_root(cfg.cache_dir) / subdir / key / "sim"
    if binary.exists():
        return binary, None
    if key in _FAILED:
        return None, _FAILED[key]
    binary.parent.parent.mkdir(parents=True, exist_ok=True)
    with open(binary.parent.parent / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.exists():
            return binary, None
        failure = build_into(binary)
    if failure is not None:
        _FAILED[key] = failure
        return None, failure
    return binary, None


def store_binary(built: Path, binary: Path) -> None:
    """Move a freshly built binary into its cache slot atomically (readers never see half of it)."""
    stage = binary.parent.with_name(binary.parent.name + ".tmp")
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    shutil.copy2(built, stage / "sim")
    shutil.rmtree(binary.parent, ignore_errors=True)
    stage.rename(binary.parent)


def ensure_harness(task: Task, harness_sv: str, cfg: SimConfig) -> tuple[Path | None, SimResult | None]:
    """The cached binary for (design, harness), building it on first use; or why it cannot be built."""
    try:
        tc = find_toolchain()
    except ToolchainError as exc:
        return None, SimResult("harness_error", str(exc))
    root = default_cache_root(cfg.cache_dir)
    key = harness_key(task, harness_sv, cfg, tc.version)
    return cached_binary("prebuilt", key, cfg, lambda binary: _build_into(task, harness_sv, cfg, tc, root, binary))


def untrusted_rtl_in_harness(task: Task, tc, cfg: SimConfig, root: Path, workdir: Path, sources: list[str],
                             top: str) -> SimResult | None:
    """The untrusted-RTL verdict before a harness build (vectors, cocotb): the one every testbench
    build gets (design_check.rtl_host_code), then Verilator's own parse of RTL + harness, which
    also sees host code a lexer trick hides from pyslang. The harness is chorus's: only the RTL's
    host code can be found, and it is the task's error."""
    if (refused := rtl_host_code(task, tc, cfg, root)) is not None:
        return refused
    verdict = check_ast(tc, cfg, root, workdir, sources, top, task.defines, set(), bool(task.meta.get(TRUSTED)),
                        allow_dut_writes=True)
    if verdict.status in ("task_error", "rejected"):
        return untrusted_rtl(task, verdict.reason.split(" (host code")[0])
    if verdict.status == "setup":
        return SimResult("harness_error", verdict.reason)
    if verdict.status == "over_budget" or verdict.reason.startswith("Verilator's parse tree is unreadable"):
        # unchecked RTL is never built; the harness is chorus's own, so the RTL is what is too big
        return SimResult("harness_error", f"task {task.id}: its RTL cannot be checked: {verdict.reason}")
    return None  # a parse that fails is reported by the build itself


def _build_into(task, harness_sv, cfg, tc, root, binary: Path) -> SimResult | None:
    workdir = new_workdir("harness")
    try:
        design = workdir / "design"
        for d in ("design", "run", "out"):
            (workdir / d).mkdir()
        sources = stage_design(task, design)
        if isinstance(sources, SimResult):
            return sources
        (design / HARNESS_FILE).parent.mkdir(parents=True, exist_ok=True)
        (design / HARNESS_FILE).write_text(harness_sv)
        (workdir / "out").mkdir(exist_ok=True)
        top = top_modules(harness_sv)[-1]
        if (refused := untrusted_rtl_in_harness(task, tc, cfg, root, workdir, [*sources, HARNESS_FILE], top)):
            return refused
        try:
            b = build(tc, dataclasses.replace(cfg, opt=cfg.harness_opt), workdir, [*sources, HARNESS_FILE], top,
                      task.defines, root)
        except RuntimeBuildError as exc:
            return SimResult("harness_error", str(exc).splitlines()[0])
        if b.status != "ok":
            return SimResult(b.status, f"the design does not build with the chorus harness: {b.reason}",
                             build_log=b.log, seconds={"build": round(b.seconds, 4)})
        store_binary(b.binary, binary)
        return None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_harness(task: Task, harness_sv: str, files: dict[str, str], cfg: SimConfig | None = None,
                cache_tag: str = "") -> SimResult:
    """Run the design's prebuilt harness with `files` readable as `../in/0/<name>` from its working directory."""
    return run_harness_many(task, harness_sv, [files], cfg, cache_tag)[0]


def run_harness_many(task: Task, harness_sv: str, programs: list[dict[str, str]], cfg: SimConfig | None = None,
                     cache_tag: str = "") -> list[SimResult]:
    """One result per program (its files), each what it gets alone (batch.run_programs), from as few
    simulator processes as the programs allow; cached results answer first."""
    cfg = cfg or SimConfig()
    t0 = time.monotonic()
    cache = ResultCache(default_cache_root(cfg.cache_dir), cfg.cache_max_gb) if cfg.cache else None
    keys: list[str | None] = [None] * len(programs)
    results: list[SimResult | None] = [None] * len(programs)
    if cache:
        base = harness_key(task, harness_sv, cfg, find_toolchain().version)
        for i, files in enumerate(programs):
            keys[i] = hashlib.sha256(repr((base, task.instance, sorted(files.items()), cache_tag)).encode()).hexdigest()
            results[i] = cache.get(keys[i])
    todo = [i for i, r in enumerate(results) if r is None]
    if not todo:
        return results  # type: ignore[return-value]
    binary, failure = ensure_harness(task, harness_sv, cfg)
    if failure is not None:
        for i in todo:
            results[i] = failure
        return results  # type: ignore[return-value]
    runs = run_programs(cfg, default_cache_root(cfg.cache_dir), binary, [programs[i] for i in todo])
    facts = task_facts(task)
    for i, (r, rec) in zip(todo, runs):
        result = score_run(task, cfg, r, rec, facts, {})
        result.seconds["total"] = round((time.monotonic() - t0) / len(todo), 4)
        if cache and keys[i] and result.status != "harness_error":
            cache.put(keys[i], result)
        results[i] = result
    return results  # type: ignore[return-value]
