"""Measured targets for designs that have no reference stimulus (a team's own RTL): the coverage of
uniform random stimulus, best of `runs` programs of `cycles` cycles (seeds drawn from the task id),
and a target placed by a stated rule:

    target = R + fraction * (100 - R)   rounded down to 0.1 %  (R: the best random program's overall %)

so reaching it means covering part of what random stimulus misses (generated designs use their strong
reference program in place of 100 %: tasks/generated/targets.py). A flat target (the manifest's or
the ingest's) replaces the rule; random coverage is still measured and recorded beside it. A design
random stimulus already covers fully keeps target 100. Measurements are cached by content (the RTL,
top, defines, parameters, programs and Verilator version) under <chorus cache>/targets/random.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import os
from pathlib import Path

from ..core.task import Task

VERSION = "1"  # bump when the measured programs change


def rule_target(random_best: float, fraction: float) -> float:
    """A `fraction` of the way from random stimulus's best to 100 %, rounded down to 0.1 %."""
    return math.floor((random_best + fraction * (100.0 - random_best)) * 10 + 1e-6) / 10


def _seeds(task: Task, runs: int) -> list[int]:
    base = int(hashlib.sha256(f"chorus-random-target/{task.id}".encode()).hexdigest()[:8], 16)
    return [base + i for i in range(runs)]


def random_programs(task: Task, amap=None, runs: int | None = None, cycles: int | None = None) -> list[str]:
    """The uniform random programs (vectors text) the task's target was measured with: `runs` of
    `cycles` cycles (default: its calibration's, else 4 x 500), seeded from the task id."""
    from ..stimulus.aliases import alias_map
    from ..stimulus.program import random_program, render_vectors

    cal = task.meta.get("calibration") or {}
    runs, cycles = runs or int(cal.get("random_runs", 4)), cycles or int(cal.get("random_cycles", 500))
    amap = amap or alias_map(task)
    return [render_vectors(random_program(amap, cycles=cycles, seed=s)) for s in _seeds(task, runs)]


def random_bursts(task: Task, amap=None) -> list[str]:
    """Uniform random stimulus as a writer of the vectors format would put it (every data input `?`,
    a fresh random value each cycle, for the cycles the target was measured with, else 500), after
    a reset: one burst, and the same split in two by a second reset (sticky state cleared midway).
    Short enough to be an SFT answer, where the measured programs list every cycle's values."""
    from ..stimulus.aliases import alias_map

    amap = amap or alias_map(task)
    cycles = int((task.meta.get("calibration") or {}).get("random_cycles", 500))
    burst = " ".join(f"{a.alias}=?" for a in amap.inputs) or "."
    reset = "rst x2\n" if amap.reset else ""
    half = f"{burst} x{max(1, cycles // 2)}\n"
    return [f"{reset}{burst} x{cycles}\n", reset + half + ("rst\n" if amap.reset else "") + half]


def cache_key(task: Task, runs: int, cycles: int, version: str) -> str:
    h = hashlib.sha256()
    for part in (sorted(task.rtl.items()), task.top, sorted(task.defines.items()), task.stated_parameters,
                 _seeds(task, runs), cycles, version, VERSION):
        h.update(repr(part).encode() + b"\0")
    return h.hexdigest()[:24]


def measure_random(tasks: list[Task], cfg, runs: int, cycles: int, workers: int | None = None,
                   executor=None, on_progress=None) -> tuple[dict[str, dict], dict[str, str], int]:
    """Per task id, {"random_best", "random_mean", "random_runs", "random_cycles"} (percent), the
    tasks whose random runs failed (id -> reason), and how many came from the cache."""
    from ..sim.cache import default_cache_root
    from ..sim.pool import evaluate_many
    from ..sim.toolchain import find_toolchain
    from ..stimulus.aliases import alias_map
    from ..stimulus.formats import score, score_many

    if runs < 1 or cycles < 1:
        raise ValueError(f"ingest.random_runs and ingest.random_cycles must be >= 1, got {runs} and {cycles}")
    root = default_cache_root(cfg.cache_dir) / "targets" / "random"
    version = find_toolchain().version
    measured, failed, todo = {}, {}, []
    for t in tasks:
        path = root / f"{cache_key(t, runs, cycles, version)}.json"
        if path.exists():
            measured[t.id] = json.loads(path.read_text())
        else:
            todo.append((t, path))
    jobs, failed_early = [], {}
    for t, _ in todo:
        try:
            amap = alias_map(t)
        except Exception as exc:  # ports chorus cannot alias: no random stimulus to measure
            failed_early[t.id] = f"its ports cannot be driven by random stimulus ({str(exc).splitlines()[0]})"
            continue
        jobs += [(t, text) for text in random_programs(t, amap, runs, cycles)]
    results = evaluate_many(jobs, cfg, workers, fn=functools.partial(score, "vectors", options={}),
                            fn_many=functools.partial(score_many, "vectors", options={}), executor=executor,
                            on_result=on_progress) if jobs else []
    by_task: dict[str, list] = {}
    for (t, _), r in zip(jobs, results):
        by_task.setdefault(t.id, []).append(r)
    for t, path in todo:
        if t.id in failed_early:
            failed[t.id] = failed_early[t.id]
            continue
        rs = by_task[t.id]
        bad = next((r for r in rs if r.status != "ok" or r.overall is None), None)
        if bad is not None:
            failed[t.id] = f"random stimulus did not run ({bad.status}: {str(bad.reason).splitlines()[0][:200]})"
            continue
        covs = [r.overall for r in rs]
        m = {"random_best": max(covs), "random_mean": sum(covs) / len(covs), "random_runs": runs,
             "random_cycles": cycles}
        _write_atomic(path, m)
        measured[t.id] = m
    return measured, failed, len(tasks) - len(todo)


def _write_atomic(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)  # jobs side by side may measure the same design


def set_target(task: Task, random: dict | None, fraction: float, flat: float | None) -> Task:
    """The task's `targets` from its random measurement and the rule (or `flat`), recorded in
    meta["calibration"] with the rule's name (in place; returns the task)."""
    if flat is not None:
        target, rule = float(flat), "flat"
    else:
        target, rule = rule_target(random["random_best"], fraction), f"random + {fraction:g} x (100 - random)"
    task.targets = {"overall": target}
    task.meta["calibration"] = {**(random or {}), "rule": rule}
    return task
