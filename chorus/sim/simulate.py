"""simulate(): one untrusted testbench against one design, scored like CVDP.

scan -> fresh temp dir -> build -> run (limits, own process group) -> coverage of the DUT
instance's subtree. Every failure becomes a status with a one-line reason; nothing raises
for bad testbench input.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path, PurePosixPath

from ..tasks.schema import Task
from .build import build, build_fingerprint
from .cache import ResultCache, default_cache_root, result_key
from .config import SimConfig
from .design import design_facts
from .execute import run_binary, score_run
from .result import SimResult
from .runtime import RuntimeBuildError
from .sandbox import rewrite_stop_as_finish, scan_testbench
from .svlex import top_modules
from .toolchain import ToolchainError, find_toolchain


def _safe_relpath(name: str) -> str | None:
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        return None
    return str(p)


def task_facts(task: Task):
    """Design facts of the task's RTL (cached by content)."""
    return design_facts(tuple(sorted(task.rtl.items())), tuple(sorted(task.defines.items())))


def simulate(task: Task, testbench: str | None, cfg: SimConfig | None = None) -> SimResult:
    cfg = cfg or SimConfig()
    t0 = time.monotonic()
    testbench = testbench or ""
    try:
        tc = find_toolchain()
    except ToolchainError as exc:
        return SimResult("harness_error", str(exc))
    root = default_cache_root(cfg.cache_dir)
    key = result_key(task.rtl, task.defines, task.top, task.instance, testbench, task.tb_name,
                     build_fingerprint(cfg), tc.version)
    cache = ResultCache(root) if cfg.cache else None
    if cache and (hit := cache.get(key)):
        return hit
    result = _simulate_uncached(task, testbench, cfg, tc, root)
    result.seconds["total"] = round(time.monotonic() - t0, 4)
    if cache and result.status != "harness_error":
        cache.put(key, result)
    return result


def _simulate_uncached(task: Task, testbench: str, cfg: SimConfig, tc, root: Path) -> SimResult:
    facts = task_facts(task)
    reason = scan_testbench(testbench, facts.module_names)
    if reason:
        return SimResult("rejected", reason)
    tops = top_modules(testbench)
    if not tops:
        return SimResult("compile_error", "the testbench declares no top-level module")
    tb_top = tops[-1]
    # The testbench lives in verif/ as in CVDP's layout, so it never shadows an RTL file.
    tb_name = "verif/" + PurePosixPath(_safe_relpath(task.tb_name) or "tb.sv").name
    workdir = Path(tempfile.mkdtemp(prefix="chorus-sim-"))
    try:
        design, out = workdir / "design", workdir / "out"
        for d in (design, out):
            d.mkdir()
        sources = stage_design(task, design)
        if isinstance(sources, SimResult):
            return sources
        (design / tb_name).parent.mkdir(parents=True, exist_ok=True)
        (design / tb_name).write_text(rewrite_stop_as_finish(testbench))
        sources.append(tb_name)
        try:
            b = build(tc, cfg, workdir, sources, tb_top, task.defines, root, naive=cfg.naive_build)
        except RuntimeBuildError as exc:
            return SimResult("harness_error", str(exc).splitlines()[0])
        seconds = {"build": round(b.seconds, 4)}
        if b.status != "ok":
            return SimResult(b.status, b.reason, build_log=b.log, seconds=seconds)
        r, rec = run_binary(cfg, root, b.binary, workdir, {})
        return score_run(task, cfg, r, rec, facts, seconds, b.log)
    finally:
        if not cfg.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def stage_design(task: Task, design: Path) -> list[str] | SimResult:
    """Write the task's RTL under `design`; returns the relative source paths."""
    sources = []
    for name, text in task.rtl.items():
        rel = _safe_relpath(name)
        if rel is None:
            return SimResult("harness_error", f"task {task.id}: RTL file name {name!r} is not a relative path")
        (design / rel).parent.mkdir(parents=True, exist_ok=True)
        (design / rel).write_text(text)
        sources.append(rel)
    return sources
