"""The array machinery of the cross-fitted oracle: samples as tasks x runs x samples arrays, half/half
splits of each (task, run) cell, per-task scores of the run chosen on the other half, and the
permutation that deals a task's pooled samples back to the runs (the null of identical experts)."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..tracking.passk import pass_at_k_array

CHUNK = 16  # splits evaluated at once: bounds memory at CHUNK x tasks x runs x samples


@dataclass
class Cells:
    tasks: list
    runs: list
    passed: np.ndarray  # tasks x runs x samples, 0/1, NaN past a cell's count
    coverage: np.ndarray
    counts: np.ndarray  # tasks x runs


def cells(table: pd.DataFrame, runs: list[str]) -> Cells:
    """Each (task, run)'s samples side by side, padded with NaN to the largest count."""
    t = table[table["run"].isin(runs)]
    tasks = sorted(t["task_id"].unique())
    ti = pd.Index(tasks).get_indexer(t["task_id"])
    ri = pd.Index(runs).get_indexer(t["run"])
    si = t.groupby(["task_id", "run"]).cumcount().to_numpy()
    shape = (len(tasks), len(runs), int(si.max()) + 1 if len(t) else 0)
    passed, coverage = np.full(shape, np.nan), np.full(shape, np.nan)
    passed[ti, ri, si] = t["passed"].astype(float).to_numpy()
    coverage[ti, ri, si] = t["coverage"].astype(float).to_numpy()
    return Cells(tasks, list(runs), passed, coverage, (~np.isnan(passed)).sum(axis=2))


def n_combinations(counts: np.ndarray) -> float:
    """Distinct half/half splits of one task when every cell holds the same count, else inf."""
    n = int(counts.flat[0]) if counts.size else 0
    if not counts.size or (counts != n).any():
        return math.inf
    return float(math.comb(n, n // 2)) ** counts.shape[1]


def half_masks(counts: np.ndarray, n_splits: int, rng: np.random.Generator) -> np.ndarray:
    """splits x tasks x runs x samples: True for the samples in half A (floor(n/2) of each cell).
    Every split of a task's cells when there are at most n_splits of them (all cells of equal count
    n; every task then takes the same pattern of sample positions, which are exchangeable draws),
    else n_splits uniformly random ones, independently per cell."""
    T, R = counts.shape
    N = int(counts.max()) if counts.size else 0
    if n_combinations(counts) <= n_splits:
        n = N
        subsets = [np.isin(np.arange(n), c) for c in itertools.combinations(range(n), n // 2)]
        masks = np.array([np.stack(combo) for combo in itertools.product(subsets, repeat=R)])  # S x R x N
        return np.broadcast_to(masks[:, None], (len(masks), T, R, N))
    keys = rng.random((n_splits, T, R, N))
    keys[:, np.arange(N)[None, None, :] >= counts[:, :, None]] = np.inf  # padding sorts last
    ranks = keys.argsort(axis=-1).argsort(axis=-1)
    return ranks < (counts // 2)[None, :, :, None]


def _choose(select: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Per split and task, the score of the runs best on `select` (ties: their mean, the expected
    value of breaking the tie at random). select, score: splits x tasks x runs -> splits x tasks."""
    best = np.isclose(select, np.nanmax(select, axis=2, keepdims=True), rtol=0, atol=1e-12)
    return (score * best).sum(axis=2) / best.sum(axis=2)


def _halves(x: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per split, task and run: the sum of x over the masked samples, and their count."""
    x0 = np.nan_to_num(x)[None]
    return (x0 * mask).sum(axis=3), mask.sum(axis=3)


def cross_fit(c: Cells, k: int | None, n_splits: int, rng: np.random.Generator) -> dict:
    """Per task, over the splits and both ways round (choose on A score on B, choose on B score on
    A): the mean Pass@1, mean coverage and pass@k (k given and both halves of every cell holding
    at least k samples, else NaN) of the run chosen on the other half. Every cell needs 2 samples."""
    valid = ~np.isnan(c.passed)
    masks = half_masks(c.counts, n_splits, rng)
    do_k = bool(k) and k > 1 and int((c.counts // 2).min()) >= k
    sums = {"pass_at_1": 0.0, "mean_coverage": 0.0, "pass_at_k": 0.0}
    for start in range(0, len(masks), CHUNK):
        a = masks[start:start + CHUNK]
        b = valid[None] & ~a
        (pa, na), (pb, nb) = _halves(c.passed, a), _halves(c.passed, b)
        (ca, _), (cb, _) = _halves(c.coverage, a), _halves(c.coverage, b)
        for (ps, ns, cs), (pe, ne, ce) in (((pa, na, ca), (pb, nb, cb)), ((pb, nb, cb), (pa, na, ca))):
            sums["pass_at_1"] = sums["pass_at_1"] + _choose(ps / ns, pe / ne).sum(axis=0)
            sums["mean_coverage"] = sums["mean_coverage"] + _choose(cs / ns, ce / ne).sum(axis=0)
            if do_k:
                chosen = _choose(pass_at_k_array(ns, ps, k), pass_at_k_array(ne, pe, k))
                sums["pass_at_k"] = sums["pass_at_k"] + chosen.sum(axis=0)
    out = {m: np.asarray(v, dtype=float) / (2 * len(masks)) for m, v in sums.items()}
    if not do_k:
        out["pass_at_k"] = np.full(len(c.tasks), np.nan)
    return {**out, "splits": len(masks)}


def singles(c: Cells, k: int | None) -> dict:
    """Per task and run, over all its samples: pass rate, mean coverage, pass@k (tasks x runs)."""
    n = c.counts
    p = np.nansum(c.passed, axis=2)
    return {"pass_at_1": p / n, "mean_coverage": np.nansum(c.coverage, axis=2) / n,
            "pass_at_k": pass_at_k_array(n, p, k) if k and k > 1 else np.full(n.shape, np.nan)}


def dealt(c: Cells, rng: np.random.Generator) -> Cells:
    """Each task's samples of all runs pooled, shuffled and dealt back, every run keeping its count:
    runs that are identical by construction, with the data's sample counts and outcomes."""
    T, R, N = c.passed.shape
    flat_p, flat_c = c.passed.reshape(T, R * N), c.coverage.reshape(T, R * N)
    keys = np.where(np.isnan(flat_p), np.inf, rng.random((T, R * N)))
    order = keys.argsort(axis=1)  # the pooled samples of each task in random order, padding last
    start = np.concatenate([np.zeros((T, 1), dtype=int), np.cumsum(c.counts, axis=1)[:, :-1]], axis=1)
    pos = start[:, :, None] + np.arange(N)[None, None, :]
    inside = np.arange(N)[None, None, :] < c.counts[:, :, None]
    src = np.take_along_axis(order, np.where(inside, pos, 0).reshape(T, R * N), axis=1).reshape(T, R, N)
    def take(x: np.ndarray) -> np.ndarray:
        return np.where(inside, np.take_along_axis(x, src.reshape(T, R * N), axis=1).reshape(T, R, N), np.nan)
    return Cells(c.tasks, c.runs, take(flat_p), take(flat_c), c.counts.copy())
