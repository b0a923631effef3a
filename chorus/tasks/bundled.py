"""The bundled open suite: designs written for chorus, one directory each.

Check the references with `python -m chorus.tasks.check`.
Layout: bundled/<family>/<name>/{task.yaml, spec.md, rtl/*.sv, ref_tb.sv}
task.yaml keys: id, top, instance, target, difficulty, split (train|validation|test),
optional defines (mapping) and tb_name.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from ..core.modes import Split
from ..core.task import Task, TaskFormatError

BUNDLED_DIR = Path(__file__).resolve().parent / "bundled"
SPLITS = tuple(s.name for s in Split)  # tasks.split's choices, from their one definition


def _load_dir(d: Path) -> Task:
    meta_path = d / "task.yaml"
    try:
        meta = yaml.safe_load(meta_path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise TaskFormatError(f"{meta_path}: cannot read task metadata ({exc})") from None
    rtl = {f"rtl/{p.name}": p.read_text() for p in sorted((d / "rtl").glob("*.*v"))}
    if not rtl:
        raise TaskFormatError(f"{d}: no RTL files under rtl/")
    ref = d / "ref_tb.sv"
    row = {
        "id": meta.get("id", d.name), "spec": (d / "spec.md").read_text() if (d / "spec.md").exists() else "",
        "rtl": rtl, "top": meta.get("top"), "instance": meta.get("instance", "uut"),
        "targets": {"overall": float(meta.get("target", 100))}, "difficulty": meta.get("difficulty", "medium"),
        "source": "bundled", "family": d.parent.name, "split": meta.get("split", "train"),
        "defines": {str(k): str(v) for k, v in (meta.get("defines") or {}).items()},
        "reference_tb": ref.read_text() if ref.exists() else None, "tb_name": meta.get("tb_name", "tb.sv"),
    }
    return Task.from_dict(row, where=str(meta_path))


def load_bundled(split: str = "all", root: Path = BUNDLED_DIR) -> list[Task]:
    if split not in SPLITS:
        raise TaskFormatError(f"unknown split {split!r}; use one of {list(SPLITS)}")
    tasks = [_load_dir(d) for d in sorted(root.glob("*/*")) if (d / "task.yaml").exists()]
    return [t for t in tasks if split == "all" or t.split == split]
