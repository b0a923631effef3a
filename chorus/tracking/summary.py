"""Summary numbers of a per-task table."""
from __future__ import annotations

from collections import Counter, defaultdict

from .passk import mean_pass_at_k


def passes(row: dict, pass_coverage: float | None = None) -> bool:
    """The pass rule: the task's own target (`passed` as scored), or coverage >= pass_coverage %."""
    return bool(row["passed"]) if pass_coverage is None else (row["overall"] or 0.0) >= pass_coverage


def summarize(rows: list[dict], pass_coverage: float | None = None) -> dict:
    """Pass@1 = mean over tasks of the mean pass over that task's samples; pass@k is the
    unbiased estimator, reported for the k that every task has samples for. A sample passes at
    its task's target, or at `pass_coverage` % coverage when that is set (the rows keep `passed`
    by target; the rule is recorded in the summary).

    mean_overall counts a sample with no coverage (compile error, missing, ...) as 0,
    as a reward would; mean_overall_scored averages only samples that produced coverage.
    """
    if any("final" in r for r in rows):  # multi-round protocols: score each sample's kept answer
        rows = [r for r in rows if r.get("final", True)]
    if pass_coverage is not None:
        rows = [{**r, "passed": passes(r, pass_coverage)} for r in rows]
    by_task: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_task[r["task_id"]].append(r)
    n = len(by_task)
    per_task_pass = {t: sum(r["passed"] for r in rs) / len(rs) for t, rs in by_task.items()}
    scored = [r["overall"] for r in rows if r["overall"] is not None]

    def by(key: str) -> dict[str, float]:
        groups: dict[str, list[float]] = defaultdict(list)
        for t, rs in by_task.items():
            groups[str(rs[0].get(key) or "")].append(per_task_pass[t])
        return {g: sum(v) / len(v) for g, v in sorted(groups.items())}

    fewest = min((len(rs) for rs in by_task.values()), default=0)
    return {
        "n_tasks": n,
        "n_samples": len(rows),
        "pass_rate": sum(per_task_pass.values()) / n if n else 0.0,
        "mean_overall": sum(r["overall"] or 0.0 for r in rows) / len(rows) if rows else 0.0,
        "mean_overall_scored": sum(scored) / len(scored) if scored else None,
        "instance_ok_rate": sum(r["instance_ok"] for r in rows) / len(rows) if rows else 0.0,
        "status_counts": dict(Counter(r["status"] for r in rows)),
        "pass_at_k": {str(k): mean_pass_at_k(rows, k) for k in (1, 5, 10) if k <= fewest},
        "pass_rate_by_family": by("family"),
        "pass_rate_by_difficulty": by("difficulty"),
        "pass_rate_by_source": by("source"),
        "seconds_total": round(sum(r["seconds"] for r in rows), 3),
        "pass_coverage": pass_coverage,
    }
