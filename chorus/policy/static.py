"""Policies that need no model: reference stimulus, files on disk, uniform random stimulus.

Each returns `samples` completions per task in the requested stimulus format; None means
"nothing to score" (status missing).
"""
from __future__ import annotations

from pathlib import Path

from ..core.modes import Quality
from ..core.task import Task
from ..stimulus.aliases import alias_map
from ..stimulus.formats import render
from ..stimulus.program import parse_vectors, random_program

EXTENSIONS = {"testbench": ".sv", "body": ".sv", "vectors": ".vec", "cocotb": ".py"}
QUALITIES = tuple(q.name for q in Quality)  # policy.quality's choices, from their one definition


def reference(task: Task, samples: int = 1, fmt: str = "testbench", fmt_options: dict | None = None,
              quality: str = "strong", **_) -> list[str | None]:
    """The task's own stimulus: a generated task's program of that quality, in any format;
    otherwise its reference testbench (testbench format only)."""
    if quality not in QUALITIES:
        raise ValueError(f"policy.quality must be one of {list(QUALITIES)}, got {quality!r}")
    programs = task.meta.get("programs") or {}
    if quality in programs:
        program = parse_vectors(programs[quality], alias_map(task))
        return [render(fmt, task, program, fmt_options)] * samples
    if fmt == "testbench" and quality == "strong":
        return [task.reference_tb] * samples
    return [None] * samples


def uniform_random(task: Task, samples: int = 1, fmt: str = "testbench", fmt_options: dict | None = None,
                   cycles: int = 500, seed: int = 0, **_) -> list[str | None]:
    """Every data input uniformly random on every cycle: the baseline stimulus must beat."""
    amap = alias_map(task)
    return [render(fmt, task, random_program(amap, cycles, seed + k), fmt_options) for k in range(samples)]


def from_files(task: Task, samples: int = 1, fmt: str = "testbench", dir: str | None = None, **_) -> list[str | None]:
    """DIR/<task_id><ext>, or DIR/<task_id>/<k><ext> per sample; ext follows the format."""
    if not dir:
        raise ValueError("policy=file needs policy.dir=<folder holding <task_id>.sv>")
    root = Path(dir)
    if not root.is_dir():
        raise ValueError(f"policy.dir {root} is not a folder")
    ext = EXTENSIONS.get(fmt, ".txt")
    if not _plain_name(task.id):
        return [None] * samples  # a task id with path parts never reads outside policy.dir
    per_sample = root / task.id
    if per_sample.is_dir():
        return [_read(per_sample / f"{k}{ext}", root) for k in range(samples)]
    return [_read(root / f"{task.id}{ext}", root)] * samples


def _plain_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\\0")


def _read(path: Path, root: Path) -> str | None:
    try:
        if not path.resolve().is_relative_to(root.resolve()):
            return None  # a symlink out of policy.dir is treated as a missing file
        return path.read_text(errors="replace")
    except OSError:
        return None


STATIC_POLICIES = {"reference": reference, "file": from_files, "random": uniform_random}
