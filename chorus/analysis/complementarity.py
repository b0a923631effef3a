"""Which tasks each run solves, and how those sets overlap."""
from __future__ import annotations

import pandas as pd


def solved_sets(pass_matrix: pd.DataFrame, min_rate: float = 0.5) -> dict[str, set[str]]:
    """Tasks a run solves: its pass rate over the task's samples is at least min_rate (with one
    sample per task, simply the tasks that pass). pass_matrix is task_matrix(table, "passed")."""
    return {run: set(col.index[col >= min_rate]) for run, col in pass_matrix.items()}


def jaccard(a: set, b: set) -> float:
    """|a & b| / |a | b|; undefined (NaN) when both are empty."""
    union = a | b
    return len(a & b) / len(union) if union else float("nan")


def jaccard_matrix(sets: dict[str, set]) -> pd.DataFrame:
    names = list(sets)
    return pd.DataFrame([[jaccard(sets[a], sets[b]) for b in names] for a in names], index=names, columns=names)


def unique_solves(sets: dict[str, set]) -> dict[str, set]:
    """Tasks a run solves that no other run in `sets` does."""
    return {run: s - set().union(*(o for r, o in sets.items() if r != run)) for run, s in sets.items()}


def win_loss(values: pd.DataFrame, tol: float = 0.0) -> dict[str, pd.DataFrame]:
    """Pairwise task counts on a tasks x runs matrix (e.g. mean coverage): wins[a][b] = tasks where
    a beats b by more than tol; losses = wins transposed; ties = the rest."""
    runs = list(values.columns)
    wins = pd.DataFrame([[int((values[a] > values[b] + tol).sum()) for b in runs] for a in runs],
                        index=runs, columns=runs)
    ties = len(values) - wins - wins.T
    return {"wins": wins, "losses": wins.T.copy(), "ties": ties}
