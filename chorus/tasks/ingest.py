"""Ingest a folder of designs (tasks/folder.py) into a task file: each design elaborated, its target
measured (tasks/measured_targets.py) and its split drawn from a stable hash of its name, so a design
keeps its split when its RTL changes or other designs join, and never depends on folder order."""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..core.task import Task
from .folder import DesignRefused, design_task, find_designs
from .measured_targets import measure_random, set_target

SPLIT_ORDER = ("train", "validation", "test")


@dataclass
class IngestResult:
    tasks: list[Task]
    refused: list[tuple[str, str]]  # (design, reason)
    cached: int = 0  # designs whose random coverage was read from the cache
    measured: int = 0  # designs whose random coverage was simulated now
    seconds: float = 0.0
    splits: dict = field(default_factory=dict)  # split -> count


def split_of(name: str, fractions: dict[str, float], seed: int = 0) -> str:
    """The design's split: a uniform draw from sha256(seed, name) against the cumulative fractions
    (train, validation, test in that order)."""
    bad = {k: v for k, v in fractions.items() if k not in SPLIT_ORDER or not v >= 0}
    total = sum(fractions.values())
    if bad or not abs(total - 1.0) < 1e-6:
        raise ValueError(f"ingest.splits={dict(fractions)} must give train/validation/test shares >= 0 summing to 1")
    u = int(hashlib.sha256(f"chorus-split/{seed}/{name}".encode()).hexdigest()[:15], 16) / 16 ** 15
    edge = 0.0
    for split in SPLIT_ORDER:
        edge += fractions.get(split, 0.0)
        if u < edge:
            return split
    return next(s for s in reversed(SPLIT_ORDER) if fractions.get(s, 0.0) > 0)


def ingest(src: str | Path, cfg, *, random_runs: int = 4, random_cycles: int = 500, target_fraction: float = 1 / 3,
           target: float | None = None, splits: dict | None = None, split_seed: int = 0, instance: str = "dut",
           workers: int | None = None, executor=None, on_progress=None) -> IngestResult:
    """Every design under `src` as a Task with its measured target and split; designs that cannot be
    tasks are refused with their reason and the others go on. `cfg`: the SimConfig the random
    stimulus runs with; `target`: a flat target for every design (a manifest's own wins)."""
    start = time.monotonic()
    if not 0 < target_fraction <= 1:
        raise ValueError(f"ingest.target_fraction={target_fraction} must be in (0, 1]")
    if target is not None and not 0 < target <= 100:
        raise ValueError(f"ingest.target={target} must be a coverage percentage in (0, 100]")
    splits = dict(splits or {"train": 0.6, "validation": 0.2, "test": 0.2})
    split_of("check", splits, split_seed)
    designs, refused = find_designs(Path(src))
    tasks, seen = [], {}
    for d in designs:
        if d.name in seen:
            refused.append((d.name, f"has the same name as the design in {seen[d.name]}; rename one folder"))
            continue
        try:
            t = design_task(d, instance)
        except DesignRefused as exc:
            refused.append((d.name, str(exc)))
            continue
        seen[d.name] = d.folder.name
        t.split = split_of(t.id, splits, split_seed)
        tasks.append(t)
    measured, failed, cached = measure_random(tasks, cfg, random_runs, random_cycles, workers, executor, on_progress)
    kept = []
    for t in tasks:
        flat = t.meta["design"].get("target", target)
        if t.id in failed and flat is None:
            refused.append((t.id, f"{failed[t.id]}; give it a flat target (target: in its chorus.yaml)"))
            continue
        kept.append(set_target(t, measured.get(t.id), target_fraction, flat))
    counts = {s: sum(t.split == s for t in kept) for s in SPLIT_ORDER}
    return IngestResult(kept, sorted(refused), cached, len(tasks) - cached, time.monotonic() - start, counts)
