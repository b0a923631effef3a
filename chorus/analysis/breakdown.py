"""Pass@1 and coverage per run within task groups (difficulty, source, family)."""
from __future__ import annotations

import pandas as pd

from .matrix import run_order


def breakdown(table: pd.DataFrame, by: str = "difficulty") -> pd.DataFrame:
    """One row per run and group: tasks, Pass@1 (mean per-task pass rate), mean coverage."""
    if by not in table:
        raise ValueError(f"the per-task table has no {by!r} column; choose one of difficulty, source, family")
    per_task = table.assign(passed=table["passed"].astype(float), group=table[by].fillna("").astype(str)) \
        .groupby(["run", "group", "task_id"], sort=False)[["passed", "coverage"]].mean()
    out = per_task.groupby(["run", "group"], sort=False).agg(n_tasks=("passed", "size"), pass_at_1=("passed", "mean"),
                                                             mean_coverage=("coverage", "mean")).reset_index()
    out = out.rename(columns={"group": by})
    order = {r: i for i, r in enumerate(run_order(table))}
    return out.sort_values(["run", by], key=lambda s: s.map(order) if s.name == "run" else s).reset_index(drop=True)
