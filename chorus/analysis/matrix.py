"""From the tidy per-sample table to task x run matrices, on the tasks every run shares."""
from __future__ import annotations

import warnings

import pandas as pd

from ..tracking.passk import pass_at_k


def run_order(table: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(table["run"]))


def align_tasks(table: pd.DataFrame) -> pd.DataFrame:
    """Keep the tasks every run has; warn with the counts when task sets differ."""
    tasks = table.groupby("run", sort=False)["task_id"].unique().map(set)
    common = set.intersection(*tasks) if len(tasks) else set()
    if any(len(t) != len(common) for t in tasks):
        counts = ", ".join(f"{run}: {len(t)}" for run, t in tasks.items())
        warnings.warn(f"runs cover different task sets ({counts}); comparing them on the {len(common)} tasks "
                      "all of them share", stacklevel=2)
    return table[table["task_id"].isin(common)]


def task_matrix(table: pd.DataFrame, value: str = "passed") -> pd.DataFrame:
    """Mean of `value` over each task's samples: tasks x runs (passed -> per-task pass@1)."""
    m = table.assign(_v=table[value].astype(float)).pivot_table(index="task_id", columns="run", values="_v",
                                                                aggfunc="mean")
    return m[[r for r in run_order(table) if r in m.columns]]


def pass_at_k_matrix(table: pd.DataFrame, k: int) -> pd.DataFrame:
    """Unbiased pass@k per task and run; NaN where a task has fewer than k samples."""
    g = table.groupby(["task_id", "run"])["passed"].agg(["count", "sum"])
    values = [pass_at_k(int(n), int(c), k) if n >= k else float("nan") for n, c in zip(g["count"], g["sum"])]
    m = pd.Series(values, index=g.index).unstack("run")
    return m[[r for r in run_order(table) if r in m.columns]]


