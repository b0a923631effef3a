"""A stage's SFT examples as a dataset folder: one parquet file that Hugging Face `datasets` loads as
its train split (`datasets.load_dataset("parquet", data_dir=folder)`, or `load_dataset(folder)`), with
provenance per row, and chorus_dataset.json written last: a folder without it is unfinished.

Every row must name a training task: a validation or test design in SFT data would leak the designs
the experts are judged on, so writing and reading both refuse it in one line.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ..core.task import Task
from .data import Example

DATA_FILE = "train-00000-of-00001.parquet"  # `datasets` reads the split from the name
INFO_FILE = "chorus_dataset.json"
TEACHER_KEYS = ("teacher_engine", "teacher_model", "temperature", "top_p", "top_k", "max_new_tokens",
                "samples_per_task")
META_KEYS = ("source", "grade", "sample", "round", "status", "from_coverage", "from_status")
COLUMN_TYPES = {"sample": int, "round": int, "top_k": int, "max_new_tokens": int, "samples_per_task": int,
                "from_coverage": float, "temperature": float, "top_p": float}  # the others: str


def check_training_task(task_id: str, split: str | None, tasks: dict[str, Task], where: str) -> None:
    task = tasks.get(task_id)
    if task is None:
        raise ValueError(f"{where}: task {task_id!r} is not among sft_stage.tasks; train on data made for these "
                         "tasks (or point sft_stage.tasks at the task file it was made from)")
    for s in (split, task.split):
        if s is not None and s != "train":
            raise ValueError(f"{where}: task {task_id!r} is in the {s} split; validation and test designs never "
                             "enter training data (rebuild the data from the training tasks)")


def to_row(e: Example, task: Task, stage: str, revision: str | None) -> dict:
    meta = dict(e.meta)
    row = {"task_id": e.task_id, "split": task.split, "kind": e.kind, "messages": e.messages,
           "completion": e.completion, "coverage": float(e.coverage), "stage": stage, "revision": revision,
           "design": (task.meta.get("design") or {}).get("content")}
    for k in META_KEYS + TEACHER_KEYS:
        v = meta.pop(k, None)
        row[k] = None if v is None else COLUMN_TYPES.get(k, str)(v)
    row["meta"] = json.dumps(meta, sort_keys=True, default=str)
    return row


def write_dataset(examples: list[Example], tasks: list[Task], folder: str | Path, stage: str,
                  revision: str | None = None) -> Path:
    """Write `examples` (each of a training task in `tasks`) to `folder`, replacing what was there only
    once the new folder is complete."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    by_id, folder = {t.id: t for t in tasks}, Path(folder)
    for n, e in enumerate(examples):
        check_training_task(e.task_id, None, by_id, f"example {n}")
    rows = [to_row(e, by_id[e.task_id], stage, revision) for e in examples]
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows) if rows else pa.table({"task_id": pa.array([], pa.string())}),
                   tmp / DATA_FILE)
    counts = {k: sum(r["kind"] == k for r in rows) for k in ("validated", "repair")}
    sources = sorted({r["source"] for r in rows if r["source"]})
    (tmp / INFO_FILE).write_text(json.dumps({"stage": stage, "rows": len(rows), "kinds": counts,
                                             "sources": sources, "tasks": len({r["task_id"] for r in rows}),
                                             "revision": revision}, indent=1))
    if folder.exists():
        shutil.rmtree(folder)
    tmp.rename(folder)
    return folder


def read_dataset(folder: str | Path, tasks: list[Task]) -> list[Example]:
    """The examples of a dataset folder (write_dataset's, or any with its columns), each row checked
    to name a training task of `tasks`."""
    import pyarrow.parquet as pq

    folder = Path(folder)
    if not (folder / INFO_FILE).exists():
        raise ValueError(f"sft_stage.data={folder} is not a finished chorus SFT dataset (no {INFO_FILE}); pass the "
                         "data/ folder of a stage run that completed")
    files = sorted(folder.glob("*.parquet"))
    if not files:
        raise ValueError(f"sft_stage.data={folder} holds no parquet file")
    by_id, out = {t.id: t for t in tasks}, []
    for f in files:
        for n, row in enumerate(pq.read_table(f).to_pylist(), 1):
            missing = [k for k in ("task_id", "kind", "messages", "completion") if row.get(k) is None]
            if missing:
                raise ValueError(f"{f.name} row {n}: missing {missing}; a dataset row needs task_id, kind, messages "
                                 "and completion")
            check_training_task(row["task_id"], row.get("split"), by_id, f"{f.name} row {n}")
            meta = {k: row[k] for k in META_KEYS + TEACHER_KEYS if row.get(k) is not None}
            out.append(Example(row["task_id"], row["kind"], row["messages"], row["completion"],
                               float(row.get("coverage") or 0.0), {**json.loads(row.get("meta") or "{}"), **meta}))
    return out
