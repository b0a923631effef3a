"""Score completions for tasks: one row per task x sample, the project's per-task table."""
from __future__ import annotations

import functools
from typing import Sequence

from tqdm import tqdm

from .core.task import Task
from .sim import SimConfig, SimResult
from .sim.pool import evaluate_many
from .stimulus.formats import get_format, score, score_many


def result_row(task: Task, sample: int, result: SimResult | None, strict_instance: bool) -> dict:
    base = {"task_id": task.id, "sample": sample, "family": task.family, "difficulty": task.difficulty,
            "source": task.source, "split": task.split, "target": task.target, "round": 0,
            "completion_tokens": None, "parse_status": None}
    if result is None:
        return {**base, "status": "missing", "overall": None, "metrics": {}, "passed": False,
                "instance_ok": False, "seconds": 0.0, "reason": "no stimulus for this task", "end": None,
                "cached": False}
    return {**base, "status": result.status,
            "overall": None if result.overall is None else round(result.overall, 4),
            "metrics": {k: round(v, 4) for k, v in (result.report.metrics if result.report else {}).items()},
            "passed": result.passed(task.target, strict_instance), "instance_ok": result.instance_ok,
            "seconds": round(result.seconds.get("total", 0.0), 4), "reason": result.reason, "end": result.end,
            "cached": result.cached}


def score_completions(tasks: Sequence[Task], completions: Sequence[Sequence[str | None]], cfg: SimConfig,
                      fmt: str = "testbench", fmt_options: dict | None = None, workers: int | None = None,
                      progress: bool = True, executor=None) -> list[dict]:
    """`completions[i]` holds the samples for `tasks[i]` in format `fmt`; None samples are missing."""
    jobs, where = [], []
    for ti, samples in enumerate(completions):
        for si, tb in enumerate(samples):
            if tb is not None:
                jobs.append((tasks[ti], tb))
                where.append((ti, si))
    bar = tqdm(total=len(jobs), desc="simulate", unit="tb", disable=not progress, leave=False)
    fn = functools.partial(score, fmt, options=fmt_options or {})
    many = functools.partial(score_many, fmt, options=fmt_options or {}) if get_format(fmt).score_many else None
    results = evaluate_many(jobs, cfg, workers, on_result=lambda i, r: bar.update(1), fn=fn,
                            executor=executor, fn_many=many)
    bar.close()
    by_pos = dict(zip(where, results))
    return [result_row(tasks[ti], si, by_pos.get((ti, si)), cfg.strict_instance)
            for ti, samples in enumerate(completions) for si in range(len(samples))]
