"""Oracle unions over experts and how much of their headroom a consolidated model recovers."""
from __future__ import annotations

import math

import pandas as pd

from .complementarity import solved_sets


def oracle_union(pass_matrix: pd.DataFrame, coverage: pd.DataFrame | None = None,
                 passk: pd.DataFrame | None = None, min_rate: float = 0.5) -> dict:
    """An oracle that picks, per task, the run that does best on it.

    pass_at_1: mean over tasks of the best run's per-task pass@1; pass_at_k likewise from a pass@k
    matrix; mean_coverage from a coverage matrix; solved_union: share of tasks some run solves.
    best_single is the run with the highest Pass@1 (first in column order on ties)."""
    if pass_matrix.shape[1] == 0 or pass_matrix.shape[0] == 0:
        raise ValueError("an oracle union needs at least one run and one task")
    single = pass_matrix.mean()
    best = single.idxmax()
    out = {"runs": list(pass_matrix.columns), "n_tasks": len(pass_matrix),
           "pass_at_1": float(pass_matrix.max(axis=1).mean()),
           "solved_union": len(set().union(*solved_sets(pass_matrix, min_rate).values())) / len(pass_matrix),
           "best_single": best, "best_single_pass_at_1": float(single[best])}
    out["headroom"] = out["pass_at_1"] - out["best_single_pass_at_1"]
    if coverage is not None:
        out["mean_coverage"] = float(coverage.max(axis=1).mean())
        out["best_single_coverage"] = float(coverage.mean().max())
    if passk is not None:
        out["pass_at_k"] = float(passk.max(axis=1).mean()) if not passk.isna().any().any() else float("nan")
    return out


def gap_recovery(consolidated: float, best_single: float, oracle: float, min_headroom: float = 0.0) -> float:
    """(consolidated - best single) / (oracle - best single): 1 = all the headroom, 0 = none,
    < 0 = worse than the best expert; NaN when the oracle equals the best single run (no headroom)
    or beats it by less than min_headroom (a ratio over noise)."""
    headroom = oracle - best_single
    if math.isclose(headroom, 0.0, abs_tol=1e-12) or headroom < min_headroom:
        return float("nan")
    return (consolidated - best_single) / headroom
