"""simulate(): one untrusted testbench against one design, scored like CVDP.

scan -> fresh temp dir -> build -> run (limits, own process group) -> coverage of the DUT
instance's subtree. Every failure becomes a status with a one-line reason; nothing raises
for bad testbench input.
"""
from __future__ import annotations

import functools
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..core.task import TRUSTED, Task
from .build import build, build_fingerprint
from .cache import ResultCache, default_cache_root, result_key
from .config import SimConfig
from .design import design_facts
from .dut_parameters import parameters_key
from .execute import run_solo, score_run
from .result import SimResult
from .runtime import RuntimeBuildError
from . import checker, safety
from .design_check import (design_problem, design_sources, rtl_check_problem, rtl_host_code, rtl_too_large,
                           stage_design, stated_design, testbench_path, untrusted_rtl)
from .preprocess import preprocess
from .verilator_ast import DutSpec, check_ast
from .toolchain import ToolchainError, find_toolchain
from .workdirs import new_workdir


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
    # Trust changes what may be built, so a trusted run's `ok` must never answer an untrusted one.
    trust = "+trusted-rtl" if task.meta.get(TRUSTED) else ""
    trust += f"+parameters={parameters_key(task)}" if task.parameters else ""
    key = result_key(task.rtl, task.defines, task.top, task.instance, testbench, task.tb_name,
                     build_fingerprint(cfg) + trust, tc.version)
    cache = ResultCache(root, cfg.cache_max_gb) if cfg.cache else None
    if cache and (hit := cache.get(key)):
        return hit
    result = _simulate_uncached(task, testbench, cfg, tc, root)
    result.seconds["total"] = round(time.monotonic() - t0, 4)
    if cache and result.status != "harness_error":
        cache.put(key, result)
    return result


def _simulate_uncached(task: Task, testbench: str, cfg: SimConfig, tc, root: Path) -> SimResult:
    encoded = testbench.encode("utf-8", "replace")  # lone surrogates cannot be written
    testbench = encoded.decode("utf-8")
    if not testbench.strip():
        return SimResult("rejected", "empty testbench")
    if (broken := rtl_too_large(task)):
        return SimResult("harness_error", broken)
    if len(encoded) > cfg.max_testbench_kb * 1024:
        return SimResult("rejected", f"the testbench is larger than simulator.max_testbench_kb={cfg.max_testbench_kb} KB")
    try:
        facts = task_facts(task)
    except RuntimeError:  # slang stops past its nesting limit: the task's fault, never the sample's
        return SimResult("harness_error", f"task {task.id}: its RTL nests deeper than pyslang parses (about "
                         "1,000 levels); flatten it")
    tb_name = testbench_path(task)
    workdir = new_workdir("sim", cfg.keep_workdir)
    try:
        design, out = workdir / "design", workdir / "out"
        for d in (design, out):
            d.mkdir()
        sources = stage_design(task, design)
        if isinstance(sources, SimResult):
            return sources
        if (refused := rtl_host_code(task, tc, cfg, root)) is not None:
            return refused
        (design / tb_name).parent.mkdir(parents=True, exist_ok=True)
        (design / tb_name).write_text(testbench)
        stated = stated_design(task, tc, cfg, root)  # the design's own (once per design): not the sample's time
        # Every safety check of this sample, from the preprocessor to the walk of Verilator's tree,
        # must be done within simulator.check_timeout_s.
        deadline = checker.Deadline(cfg.check_timeout_s)
        checked = checked_testbench(task, tc, cfg, root, workdir, sources, tb_name, deadline)
        if isinstance(checked, SimResult):
            return checked
        if isinstance(stated, SimResult):
            return stated
        text, tb_top, units, unparsed = checked
        dut = DutSpec(task.top, design_sources(task), stated)
        (design / tb_name).write_text(text)  # build exactly the text that was checked
        sources.append(tb_name)
        # The AST check and the build's Verilator run side by side (both only read the sources); the
        # build compiles C++ only once the check has passed, a failed check stops it at once, and
        # decides the result.
        refused = threading.Event()

        def check_sources():
            verdict = None
            try:
                verdict = check_ast(tc, cfg, root, workdir, sources, tb_top, task.defines, set(units.declared),
                                    bool(task.meta.get(TRUSTED)), cfg.allow_dut_writes, dut, deadline)
                return verdict
            finally:
                if verdict is None or verdict.status != "ok":
                    refused.set()

        with ThreadPoolExecutor(max_workers=1) as pool:
            checking = pool.submit(check_sources)
            try:
                b = None if unparsed else build(tc, cfg, workdir, sources, tb_top, task.defines, root,
                                                naive=cfg.naive_build,
                                                gate=lambda: checking.result().status == "ok", cancel=refused)
            except RuntimeBuildError as exc:
                b = SimResult("harness_error", str(exc).splitlines()[0])
            verdict = checking.result()
        if verdict.status != "ok":
            return _ast_result(task, tc, cfg, root, verdict)
        if unparsed:
            return SimResult("rejected", f"{unparsed}, although Verilator accepts it; chorus builds only "
                             "what both parsers read the same way")
        if isinstance(b, SimResult):
            return b
        seconds = {"build": round(b.seconds, 4)}
        if b.status != "ok":
            return _blame(task, tc, cfg, root, b.status, b.reason, b.log, seconds)
        r, rec = run_solo(cfg, root, b.binary, workdir)
        return score_run(task, cfg, r, rec, facts, seconds, b.log)
    finally:
        if not cfg.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def _blame(task: Task, tc, cfg: SimConfig, root: Path, status: str, reason: str, log: str,
           seconds: dict | None = None) -> SimResult:
    """A build step failed on this testbench: the testbench's fault (compile_error, timeout),
    unless the task's RTL fails on its own, which makes it a task error (harness_error)."""
    if status in ("compile_error", "timeout") and (broken := design_problem(task, tc, cfg, root)):
        return SimResult("harness_error", broken, build_log=log, seconds=seconds or {})
    return SimResult(status, reason, build_log=log, seconds=seconds or {})


def _ast_result(task: Task, tc, cfg: SimConfig, root: Path, verdict) -> SimResult:
    if verdict.status == "setup":
        return SimResult("harness_error", verdict.reason)
    if verdict.status == "task_error":
        return untrusted_rtl(task, verdict.reason)
    if verdict.status == "over_budget" or verdict.reason.startswith("Verilator's parse tree is unreadable"):
        # the sample's fault, unless the task's RTL alone cannot be checked either (decided once per design)
        if broken := rtl_check_problem(task, tc, cfg, root):
            return SimResult("harness_error", broken, build_log=verdict.log)
        return SimResult("rejected" if verdict.status == "over_budget" else "compile_error", verdict.reason,
                         build_log=verdict.log)
    return _blame(task, tc, cfg, root, verdict.status, verdict.reason, verdict.log)


def checked_testbench(task: Task, tc, cfg: SimConfig, root: Path, workdir: Path, sources: list[str],
                      tb_name: str, deadline: checker.Deadline | None = None
                      ) -> tuple[str, str, safety.DesignUnits, str | None] | SimResult:
    """The preprocessed testbench, its top module and the design's units, or the result that
    stops the run here; within `deadline` (default: simulator.check_timeout_s from now)."""
    deadline = deadline or checker.Deadline(cfg.check_timeout_s)
    pre = preprocess(tc, cfg, root, workdir, sources, tb_name, task.defines, deadline)
    if pre.status == "setup":
        return SimResult("harness_error", pre.reason)
    if pre.status in ("too_large", "refused"):
        return SimResult("rejected", pre.reason, build_log=pre.log)
    if pre.status != "ok":
        return _blame(task, tc, cfg, root, "compile_error", pre.reason, pre.log)
    try:
        design = rtl_units(pre.rtl)  # its host code was judged before (design_check.rtl_host_code)
    except RuntimeError:  # slang stops past its nesting limit: the task's fault, never the sample's
        return SimResult("harness_error", f"task {task.id}: its RTL nests deeper than pyslang parses (about "
                         "1,000 levels); flatten it")
    # pyslang's reading runs in a child under simulator.check_timeout_s / check_mem_mb (checker.py)
    payload = {"text": pre.testbench, "name": tb_name, "allow_dut_writes": cfg.allow_dut_writes,
               "design": {"declared": sorted(design.declared), "instantiated": sorted(design.instantiated),
                          "host_access": design.host_access, "modules": sorted(design.modules)}}
    answer = checker.run_check("review", payload, cfg, workdir / "out", key=payload, deadline=deadline)
    if "over_budget" in answer:
        return SimResult("rejected", answer["over_budget"])
    if "rejected" in answer:
        return SimResult("rejected", answer["rejected"])
    if not answer["tops"]:
        return SimResult("compile_error", "the testbench declares no top-level module")
    return answer["text"], answer["tops"][-1], design, answer["unparsed"]


@functools.lru_cache(maxsize=256)
def rtl_units(rtl_text: str) -> safety.DesignUnits:
    """The preprocessed RTL's units and host access, parsed once per design (not per testbench)."""
    return safety.design_units(safety.parse(rtl_text, "rtl"))
