"""Per-task coverage targets for generated designs, set the way CVDP sets them: reachable (the strong
reference program reaches more), and above what uniform random stimulus gets.

For each design, the strong program's coverage S and the best of RANDOM_RUNS uniform random
programs R (COMPACT_CYCLES cycles each, seeds drawn from the task id so they are not the random
baseline's seeds) are measured, and

    target = R + TARGET_FRACTION * (S - R)   rounded down to 0.1 %

so reaching the target means covering part of what random stimulus misses. A design with no hole
(S <= R + MIN_HOLE) gets target S: it counts as solved only at the reference's coverage. A design
with alternative strategies (meta["strategies"]) has each measured too, and meta["reaches"] lists
those that reach the target: the skills the task calls for. The
measurements are cached on disk (<chorus cache>/targets), keyed by the design, the programs and the
Verilator version, so each design is simulated once per machine.
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import os

from ...core.task import Task
from .common import COMPACT_CYCLES

log = logging.getLogger(__name__)
RANDOM_RUNS = 4
# A third of the way from random to the reference: the compact reference programs, which act only on
# the brief's facts, must be able to pass, and a model that merely writes random bursts must not
# (measure.py, 40 medium designs of seed 100: every compact program reached its target, no random one).
TARGET_FRACTION = 1 / 3
MIN_HOLE = 1.0  # coverage points: below this, random stimulus already reaches the reference
VERSION = "1"  # bump when the rule or the measured programs change


def _seeds(task: Task) -> list[int]:
    base = int(hashlib.sha256(f"chorus-target/{task.id}".encode()).hexdigest()[:8], 16)
    return [base + i for i in range(RANDOM_RUNS)]


def target_from(strong: float, random_best: float) -> float:
    """The target between random stimulus's best and the strong reference (both in percent)."""
    if strong <= random_best + MIN_HOLE:
        return strong
    return math.floor((random_best + TARGET_FRACTION * (strong - random_best)) * 10) / 10


def _key(task: Task, version: str) -> str:
    h = hashlib.sha256()
    strategies = sorted(task.meta.get("strategies", {}).items())
    for part in (sorted(task.rtl.items()), task.top, task.meta["programs"]["strong"], _seeds(task),
                 COMPACT_CYCLES, version, VERSION, *([strategies] if strategies else [])):
        h.update(repr(part).encode() + b"\0")
    return h.hexdigest()[:24]


def calibrate_targets(tasks: list[Task], workers: int | None = None, cache_dir: str | None = None,
                      isolation: str = "required") -> list[Task]:
    """Set each generated task's `targets["overall"]` from measurement (in place; returns `tasks`) and
    record the measurement in `meta["calibration"]`. A measurement that fails raises: a task without a
    real target must not be scored as if it had one. `isolation` (simulator.isolation) may be relaxed
    where the kernel lacks a layer: the programs measured are chorus's own, not a model's."""
    from ...sim import SimConfig
    from ...sim.cache import default_cache_root
    from ...sim.pool import evaluate_many
    from ...sim.toolchain import find_toolchain
    from ...stimulus.aliases import alias_map
    from ...stimulus.formats import score, score_many
    from ...stimulus.program import random_program, render_vectors
    from ...tracking.progress import Progress, throttled

    if not tasks:
        return tasks
    cfg = SimConfig(cache=False, cache_dir=cache_dir, run_timeout_s=120, isolation=isolation)
    root = default_cache_root(cache_dir) / "targets"
    version = find_toolchain().version
    todo, cached = [], {}
    for t in tasks:
        path = root / f"{_key(t, version)}.json"
        if path.exists():
            cached[t.id] = json.loads(path.read_text())
        else:
            todo.append((t, path))
    jobs, spans = [], []
    for t, _ in todo:
        amap = alias_map(t)
        start = len(jobs)
        jobs.append((t, t.meta["programs"]["strong"]))
        jobs += [(t, render_vectors(random_program(amap, cycles=COMPACT_CYCLES, seed=s))) for s in _seeds(t)]
        jobs += [(t, program) for program in t.meta.get("strategies", {}).values()]
        spans.append((start, len(jobs)))
    if jobs:
        log.info("calibrating the targets of %d generated tasks (%d simulations; cached in %s)",
                 len(todo), len(jobs), root)
        report, finished = throttled(Progress(None).update, "calibrating task targets"), []
        results = evaluate_many(jobs, cfg, workers, fn=functools.partial(score, "vectors", options={}),
                                fn_many=functools.partial(score_many, "vectors", options={}),
                                on_result=lambda i, r: finished.append(i) or report(len(finished), len(jobs)))
        for (t, path), (start, end) in zip(todo, spans):
            runs = results[start:end]
            bad = next((r for r in runs if r.status != "ok" or r.overall is None), None)
            if bad is not None:
                raise RuntimeError(f"task {t.id}: a target calibration run ended {bad.status} ({bad.reason}); "
                                   "targets need working simulations")
            strong, *rest = (r.overall for r in runs)
            rand, own = rest[:RANDOM_RUNS], rest[RANDOM_RUNS:]
            cal = {"strong": strong, "random_best": max(rand), "random_mean": sum(rand) / len(rand),
                   "random_runs": len(rand), "random_cycles": COMPACT_CYCLES}
            if own:
                cal["strategies"] = dict(zip(t.meta["strategies"], own))
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(cal))
            tmp.replace(path)  # atomic: jobs side by side may calibrate the same task
            cached[t.id] = cal
    for t in tasks:
        cal = cached[t.id]
        t.meta["calibration"] = cal
        t.targets = {"overall": target_from(cal["strong"], cal["random_best"])}
        if "strategies" in cal:  # the skills this task calls for: the strategies that pass it
            t.meta["reaches"] = sorted(n for n, cov in cal["strategies"].items() if cov >= t.targets["overall"])
    return tasks

