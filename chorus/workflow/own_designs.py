"""pipeline designs=<folder>: a team's own designs ingested once before the plan (chorus/tasks/ingest.py)
into a task file named by its content, so a changed design gives every step a new run dir; every
stage and expert then trains on its train split and every evaluation scores its test split."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from pathlib import Path

from ..config.schema import IngestOptions


def ingest_designs(c: dict) -> tuple[list[str], dict]:
    """Ingest c["designs"] into <runs_dir>/tasks/tasks-<content hash>.jsonl: the settings every job
    that reads them gets, and the step record of the pipeline's time table."""
    from ..core.task import write_jsonl
    from ..sim.config import sim_config
    from ..tasks.ingest import ingest

    start = time.time()
    sim, workers = sim_config({})
    options = {f.name: c["ingest"][f.name] for f in dataclasses.fields(IngestOptions)}
    result = ingest(c["designs"], sim, workers=workers, **options)
    for name, reason in result.refused:
        print(f"chorus.pipeline: design {name}: refused: {reason}")
    if not result.splits.get("train") or not result.splits.get("test"):
        raise ValueError(f"{c['designs']} gave {result.splits.get('train', 0)} training and {result.splits.get('test', 0)} "
                         "test designs; both are needed: add designs, or draw other splits (ingest.split_seed=1)")
    text = "".join(json.dumps(t.to_dict()) + "\n" for t in result.tasks)
    path = Path(c["runs_dir"]) / "tasks" / f"tasks-{hashlib.sha256(text.encode()).hexdigest()[:10]}.jsonl"
    write_jsonl(result.tasks, path)
    overrides = ["sft_stage.tasks.name=jsonl", f"sft_stage.tasks.path={path}",
                 "rl.tasks.name=jsonl", f"rl.tasks.path={path}", "rl.tasks.split=train",
                 "rl.eval_tasks.name=jsonl", f"rl.eval_tasks.path={path}", "rl.eval_tasks.split=test"]
    splits = ", ".join(f"{k} {v}" for k, v in result.splits.items())
    record = {"name": f"ingest ({len(result.tasks)} designs: {splits}; {len(result.refused)} refused)",
              "status": "done" if result.measured else "cached", "seconds": round(time.time() - start, 1),
              "run_dir": str(path), "started": round(start, 1), "ended": round(time.time(), 1)}
    return overrides, record
