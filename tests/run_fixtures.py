"""Hand-built run dirs with per-task tables whose analysis numbers are computed by hand.

Six tasks (t0-t2 easy, t3-t5 hard), two samples each. Per-task pass rates:

    run                  t0   t1   t2   t3   t4   t5   Pass@1   solved (rate >= 0.5)
    dapo/stage0          1    .5   0    0    0    0    1.5/6    {t0, t1}
    dapo/stage1          1    0    1    .5   0    0    2.5/6    {t0, t2, t3}
    dapo/stage2          0    0    .5   0    1    0    1.5/6    {t2, t4}
    in-sample oracle     1    .5   1    .5   1    0    4/6      union {t0..t4} = 5/6
    cross-fitted oracle  1    1/6  3/4  1/6  1    0    37/72    (choose on one sample, score the other)
    ties/three_experts   1    .5   1    0    0    0    2.5/6    in-sample gap recovery 0
    opd/three_experts    1    .5   1    .5   .5   0    3.5/6    in-sample (3.5-2.5)/(4-2.5) = 2/3
    soup/three_experts   1    0    0    0    0    0    1/6      in-sample (1-2.5)/1.5 = -1

With 6 tasks the cross-fitted headroom's lower bound is not above 0, so complementarity is not
claimed and the table leaves gap recovery undefined (chorus.analysis.oracle.versus_best); the
consolidated runs' paired deltas against the best expert (stage1) are +1/6 (opd), 0 (ties), -1/4 (soup).

A passing sample has coverage 96 (target 95); a failing one 40 + 5 * task index, or none when its
status is compile_error (counted as 0).
"""
from __future__ import annotations

import json
from pathlib import Path

from chorus.tracking.record import run_metadata
from chorus.tracking.run_dir import write_run
from chorus.tracking.summary import summarize

TASKS = ["t0", "t1", "t2", "t3", "t4", "t5"]
PASSES = {  # run dir -> per task, per sample
    "rl/dapo/stage0": [[1, 1], [1, 0], [0, 0], [0, 0], [0, 0], [0, 0]],
    "rl/dapo/stage1": [[1, 1], [0, 0], [1, 1], [1, 0], [0, 0], [0, 0]],
    "rl/dapo/stage2": [[0, 0], [0, 0], [1, 0], [0, 0], [1, 1], [0, 0]],
    "consolidation/ties/three_experts": [[1, 1], [1, 0], [1, 1], [0, 0], [0, 0], [0, 0]],
    "consolidation/opd/three_experts": [[1, 1], [0, 1], [1, 1], [1, 0], [0, 1], [0, 0]],
    "consolidation/soup/three_experts": [[1, 1], [0, 0], [0, 0], [0, 0], [0, 0], [0, 0]],
}


def rows_for(passes: list[list[int]], tasks=TASKS) -> list[dict]:
    rows = []
    for i, (task, samples) in enumerate(zip(tasks, passes)):
        for s, ok in enumerate(samples):
            failed_compile = not ok and i == 5 and s == 1
            rows.append({"task_id": task, "sample": s, "family": "fsm" if i % 2 else "counter",
                         "difficulty": "easy" if i < 3 else "hard", "source": "generated", "split": "test",
                         "target": 95.0, "status": "compile_error" if failed_compile else "ok",
                         "overall": None if failed_compile else (96.0 if ok else 40.0 + 5 * i),
                         "metrics": {} if failed_compile else {"block": 90.0}, "passed": bool(ok),
                         "instance_ok": True, "seconds": 0.01, "reason": ""})
    return rows


def meta_for(rel: str, seed: int = 0) -> dict:
    parts = rel.split("/")
    if parts[0] == "rl":
        return run_metadata("rl", "tiny-s", seed, sft_stage=parts[2], rl_algo=parts[1])
    return run_metadata("consolidation", "tiny-s", seed, consolidation=parts[1], teacher_pool=parts[2])


def write_fixture_runs(root: Path, runs: dict | None = None, seed: int = 0) -> Path:
    """The runs above under root/<rel>; OPD also gets a decisions.jsonl of routing decisions."""
    root = Path(root)
    for rel, passes in (runs or PASSES).items():
        rows = rows_for(passes)
        write_run(root / rel, rows, {**summarize(rows), **meta_for(rel, seed)})
    opd = root / "consolidation/opd/three_experts"
    if opd.exists():
        decisions = [{"step": 1, "task_id": "t3", "teacher": "stage1", "reason": "best_teacher_beats_student"},
                     {"step": 1, "task_id": "t0", "teacher": None, "reason": "student_not_beaten"},
                     {"step": 2, "task_id": "t4", "teacher": "stage2", "reason": "best_teacher_beats_student"},
                     {"step": 2, "task_id": "t5", "teacher": None, "reason": "student_not_beaten"}]
        (opd / "decisions.jsonl").write_text("".join(json.dumps(d) + "\n" for d in decisions))
    return root
