"""Tasks and where they come from: a registry of suite loaders."""
from __future__ import annotations

from pathlib import Path

from .bundled import SPLITS, load_bundled
from .cvdp import load_cvdp
from ..core.task import TRUSTED, Task, TaskFormatError, read_jsonl


def _jsonl(path: str | None = None, **_) -> list[Task]:
    if not path:
        raise TaskFormatError("tasks=jsonl needs tasks.path=<file.jsonl>")
    return read_jsonl(Path(path))


def _cvdp(path: str | None = None, reference_dir: str | None = None, **_) -> list[Task]:
    if not path:
        raise TaskFormatError("tasks=cvdp needs tasks.path=<cvdp_v1.0.2_cid012.jsonl>")
    return load_cvdp(path, reference_dir)


def _bundled(split: str = "all", **_) -> list[Task]:
    return load_bundled("all")


def _generated(seed: int = 0, per_family: int = 8, difficulty: str = "medium",
               families: list[str] | None = None, split: str = "all", prune: list[str] | None = None,
               **_) -> list[Task]:
    from .generated import calibrate_targets, generate_tasks, prune as prune_classes  # only needed when asked for

    tasks = generate_tasks(seed=seed, per_family=per_family, difficulty=difficulty, families=families)
    tasks = calibrate_targets([t for t in tasks if split in ("all", t.split)])  # only the tasks asked for
    return prune_classes(tasks, prune)  # by class, which calibration's measured reaches decide


SUITES = {"bundled": _bundled, "cvdp": _cvdp, "jsonl": _jsonl, "generated": _generated}


def load_tasks(name: str, path: str | None = None, split: str = "all", limit: int | None = None,
               ids: list[str] | None = None, reference_dir: str | None = None, trusted: bool = False,
               **suite_options) -> list[Task]:
    """Load a suite, then filter by split, ids and limit (in that order).

    `suite_options` go to the suite's loader (e.g. seed, per_family, difficulty for generated).
    `trusted` lets the tasks' RTL use host code ($c, DPI, `systemc_*); it is never read from a file."""
    if name not in SUITES:
        raise TaskFormatError(f"unknown task suite {name!r}; choose one of {sorted(SUITES)}")
    if suite_options.get("prune") and name != "generated":
        raise TaskFormatError(f"tasks.prune picks generated design classes; tasks={name} has none (remove it)")
    if split not in SPLITS:
        raise TaskFormatError(f"unknown split {split!r}; use one of {list(SPLITS)}")
    tasks = SUITES[name](path=path, split=split, reference_dir=reference_dir, **suite_options)
    if split != "all" and name != "cvdp":
        tasks = [t for t in tasks if t.split == split]
    if ids:
        wanted = set(ids)
        missing = sorted(wanted - {t.id for t in tasks})
        if missing:
            raise TaskFormatError(f"task id(s) not in the suite: {missing}")
        tasks = [t for t in tasks if t.id in wanted]
    if limit is not None:
        if limit < 0:
            raise TaskFormatError(f"tasks.limit must be >= 0, got {limit}")
        tasks = tasks[:limit]
    for t in tasks:
        t.meta[TRUSTED] = bool(trusted)
    return tasks


__all__ = ["Task", "TaskFormatError", "SUITES", "load_tasks", "read_jsonl", "write_jsonl", "load_bundled", "load_cvdp"]
