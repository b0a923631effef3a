"""Summary numbers of a per-task table."""
from __future__ import annotations

from collections import Counter, defaultdict


def summarize(rows: list[dict]) -> dict:
    """Pass@1 = mean over tasks of the mean pass over that task's samples.

    mean_overall counts a sample with no coverage (compile error, missing, ...) as 0,
    as a reward would; mean_overall_scored averages only samples that produced coverage.
    """
    by_task: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_task[r["task_id"]].append(r)
    n = len(by_task)
    per_task_pass = {t: sum(r["passed"] for r in rs) / len(rs) for t, rs in by_task.items()}
    scored = [r["overall"] for r in rows if r["overall"] is not None]
    families: dict[str, list[float]] = defaultdict(list)
    for t, rs in by_task.items():
        families[rs[0].get("family") or ""].append(per_task_pass[t])
    return {
        "n_tasks": n,
        "n_samples": len(rows),
        "pass_rate": sum(per_task_pass.values()) / n if n else 0.0,
        "mean_overall": sum(r["overall"] or 0.0 for r in rows) / len(rows) if rows else 0.0,
        "mean_overall_scored": sum(scored) / len(scored) if scored else None,
        "instance_ok_rate": sum(r["instance_ok"] for r in rows) / len(rows) if rows else 0.0,
        "status_counts": dict(Counter(r["status"] for r in rows)),
        "pass_rate_by_family": {f: sum(v) / len(v) for f, v in sorted(families.items())},
        "seconds_total": round(sum(r["seconds"] for r in rows), 3),
    }
