"""simulate(): one untrusted testbench against one design, scored like CVDP.

scan -> fresh temp dir -> build -> run (limits, own process group) -> coverage of the DUT
instance's subtree. Every failure becomes a status with a one-line reason; nothing raises
for bad testbench input.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path, PurePosixPath

from ..tasks.schema import Task
from .build import build, build_fingerprint
from .cache import ResultCache, default_cache_root, result_key
from .config import SimConfig
from .coverage import CoverageFormatError, compute_metrics, parse_coverage_file
from .design import design_facts, find_dut_instance
from .result import SimResult
from .runtime import RuntimeBuildError
from .process import run_limited
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
        design, run, out = workdir / "design", workdir / "run", workdir / "out"
        for d in (design, run, out):
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
        return run_and_score(task, cfg, b.binary, run, out, facts, seconds, b.log)
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


def run_and_score(task: Task, cfg: SimConfig, binary: Path, run: Path, out: Path, facts, seconds: dict,
                  build_log: str = "", extra_args: tuple[str, ...] = (), extra_env: dict | None = None) -> SimResult:
    """Run a built simulation in `run` (its working dir) and score the DUT's coverage from `out`."""
    cov_path, status_path = out / "coverage.dat", out / "status.json"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(run), "LANG": "C",
           "CHORUS_COV_OUT": str(cov_path), "CHORUS_STATUS_OUT": str(status_path),
           "CHORUS_MAX_TIME_NS": repr(float(cfg.max_sim_time_ns)), **(extra_env or {})}
    cmd = [str(binary), f"+verilator+error+limit+{cfg.error_limit}", "+verilator+seed+1", *extra_args]
    r = run_limited(cmd, cwd=run, env=env, timeout_s=cfg.run_timeout_s, log_path=out / "sim.log",
                    mem_mb=cfg.mem_limit_mb, file_mb=cfg.output_limit_mb, cpu_s=cfg.run_timeout_s + 5)
    seconds["run"] = round(r.seconds, 4)
    if r.timed_out:
        return SimResult("timeout", f"simulation did not end within {cfg.run_timeout_s:.0f} s wall clock "
                         "(a zero-delay loop?)", build_log=build_log, run_log=r.log, seconds=seconds)
    try:
        end = json.loads(status_path.read_text()).get("end")
    except (OSError, json.JSONDecodeError):
        end = None
    if end is None or not cov_path.exists():
        how = f"signal {-r.returncode}" if (r.returncode or 0) < 0 else f"exit code {r.returncode}"
        hint = " (output or memory limit?)" if (r.returncode or 0) < 0 else ""
        return SimResult("runtime_error", f"simulation crashed with {how}{hint}; no coverage written",
                         build_log=build_log, run_log=r.log, seconds=seconds)
    t = time.monotonic()
    try:
        points = parse_coverage_file(cov_path)
    except CoverageFormatError as exc:
        return SimResult("harness_error", str(exc), build_log=build_log, run_log=r.log, seconds=seconds)
    locs: dict[str, set] = defaultdict(set)
    for p in points:
        locs[p.hier].add((p.file, p.line))
    path, instance_ok = find_dut_instance(locs, facts, task.top, task.instance)
    if path is None:
        report = None
        status, reason = "ok", (f"no coverage points of module {task.top}: it is not instantiated, or nothing in "
                                f"it can ever change (all inputs tied to constants) and Verilator removed it")
    else:
        report = compute_metrics(points, path, instance_ok, facts.unpacked, task.rtl)
        status, reason = "ok", ""
        if not instance_ok:
            reason = f"DUT not instantiated as '{task.instance}'; scored {path} instead"
    if end == "output_limit":
        status, reason = "runtime_error", (f"output limit of {cfg.output_limit_mb} MB exceeded; "
                                           "simulation stopped early (coverage kept)")
    elif end == "fatal":
        status, reason = "runtime_error", "simulation aborted on a fatal error (coverage kept)"
    seconds["coverage"] = round(time.monotonic() - t, 4)
    return SimResult(status, reason, report, end, build_log, r.log, seconds)
