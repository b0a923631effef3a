"""Percentile bootstrap over tasks: resample tasks with replacement, keep each task's row intact
so that paired statistics (oracle, gap recovery) stay paired."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..core.stats import N_BOOT


def bootstrap_ci(values, stat: Callable[[np.ndarray], float], n_boot: int = N_BOOT, alpha: float = 0.05,
                 seed: int = 0) -> tuple[float, float]:
    """(lo, hi) of stat over n_boot resamples of the rows (tasks) of `values` (tasks x columns).
    Resamples where stat is NaN are dropped; all-NaN or no tasks gives (nan, nan)."""
    m = np.asarray(values, dtype=float)
    if m.ndim == 1:
        m = m[:, None]
    if len(m) == 0 or n_boot < 1:
        return float("nan"), float("nan")
    idx = np.random.default_rng(seed).integers(0, len(m), size=(n_boot, len(m)))
    stats = np.array([stat(m[i]) for i in idx], dtype=float)
    stats = stats[~np.isnan(stats)]
    if not len(stats):
        return float("nan"), float("nan")
    lo, hi = np.quantile(stats, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def bootstrap_mean_ci(values, n_boot: int = N_BOOT, alpha: float = 0.05, seed: int = 0) -> tuple[float, float]:
    """bootstrap_ci of the mean of a 1-D array (e.g. per-task paired differences), vectorised: the
    same resamples and so the same interval, without a Python call per resample."""
    v = np.asarray(values, dtype=float)
    if len(v) == 0 or n_boot < 1 or np.isnan(v).any():
        return float("nan"), float("nan")
    idx = np.random.default_rng(seed).integers(0, len(v), size=(n_boot, len(v)))
    lo, hi = np.quantile(v[idx].mean(axis=1), [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)
