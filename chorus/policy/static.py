"""Policies that need no model: a task's reference testbench, or files on disk.

Each returns `samples` testbenches per task; None means "nothing to score" (status missing).
"""
from __future__ import annotations

from pathlib import Path

from ..tasks.schema import Task


def reference(task: Task, samples: int = 1, **_) -> list[str | None]:
    return [task.reference_tb] * samples


def from_files(task: Task, samples: int = 1, dir: str | None = None, **_) -> list[str | None]:
    """DIR/<task_id>.sv, or DIR/<task_id>/<k>.sv for sample k when that folder exists."""
    if not dir:
        raise ValueError("policy=file needs policy.dir=<folder holding <task_id>.sv>")
    root = Path(dir)
    if not root.is_dir():
        raise ValueError(f"policy.dir {root} is not a folder")
    per_sample = root / task.id
    if per_sample.is_dir():
        return [_read(per_sample / f"{k}.sv") for k in range(samples)]
    return [_read(root / f"{task.id}.sv")] * samples


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


STATIC_POLICIES = {"reference": reference, "file": from_files}
