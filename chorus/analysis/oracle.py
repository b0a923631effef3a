"""Oracle unions over experts and how much of their headroom a consolidated model recovers.

The in-sample oracle (oracle_union) picks each task's best run and scores it on the same samples,
so sampling noise shows up as headroom (three identical experts, 200 tasks, 4 samples: about 13
points of Pass@1). The cross-fitted oracle chooses and scores on disjoint halves of the samples; the
CHORUS table uses that one. Complementarity is claimed when its headroom's lower bound is above 0
(headroom_claim); a null of identical experts is reported beside it as a reference. A consolidated
model is compared with the best expert by a paired delta, and its gap recovery is given only as a
bracket between the in-sample and the cross-fitted ratio (versus_best)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..core.stats import N_BOOT
from . import crossfit
from .bootstrap import bootstrap_ci, bootstrap_mean_ci
from .complementarity import solved_sets


def oracle_union(pass_matrix: pd.DataFrame, coverage: pd.DataFrame | None = None,
                 passk: pd.DataFrame | None = None, min_rate: float = 0.5) -> dict:
    """The in-sample oracle: picks, per task, the run that does best on it, on the very samples it is
    scored on; optimistic (noise is counted as headroom), kept for reference and the solved union.

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


# --- the cross-fitted oracle, its null of identical experts, and the headroom beyond that null ---

N_SPLITS = 200  # half/half splits per task (every split when a task has at most this many)
N_NULL = 200  # dealings of the null of identical experts
NULL_SPLITS = 16  # splits per dealing (its split noise widens the null's spread a little)
METRICS = ("pass_at_1", "mean_coverage", "pass_at_k")


def _too_few(c: crossfit.Cells, k: int | None) -> dict:
    """Why a metric cannot be cross-fitted here (one line each), by metric."""
    notes = {}
    short = int((c.counts < 2).any(axis=1).sum())
    if short:
        notes["pass_at_1"] = notes["mean_coverage"] = (
            f"the cross-fitted oracle needs at least 2 samples per task and expert (one half to choose the "
            f"expert, the other to score it); {short} of {len(c.tasks)} tasks have fewer, so it is undefined "
            "(NaN): evaluate with more samples per task (the in-sample oracle would count noise as headroom)")
    if k and k > 1:
        if short or int((c.counts // 2).min()) < k:
            notes["pass_at_k"] = (f"the cross-fitted pass@{k} needs {k} samples in each half, at least {2 * k} "
                                  f"per task and expert (fewest here: {int(c.counts.min())}); undefined (NaN)")
    return notes


def cross_fitted_oracle(table: pd.DataFrame, runs: list[str], k: int | None = None, n_splits: int = N_SPLITS,
                        seed: int = 0) -> dict:
    """An oracle that picks, per task, the run that does best on it, with the choice and the score
    made on disjoint samples.

    For each task, every run's samples are split in two halves (floor(n/2) and the rest, drawn
    independently per run); the run best on half A is scored on half B and, the roles swapped, the
    run best on B is scored on A; runs tied on the choosing half count with their mean score (the
    expectation of a random tie break). The task's value is the mean over both ways round and over
    n_splits random splits (all of them, exactly, when every task and run has the same count n and
    comb(n, n // 2) ** runs <= n_splits). pass_at_1 / mean_coverage / pass_at_k are the means over
    tasks of the per-task values, choosing the run on the half's pass rate / mean coverage / pass@k.

    Because the choosing half is independent of the scoring half, runs that are identical on a task
    score their common mean there (in expectation over the data): sampling noise no longer shows up
    as headroom. The estimate is
    conservative: the choice sees half the samples, so with real differences it picks the best run
    less often than an oracle that knew the true rates. Cross-fitting needs 2 samples per task and
    run (pass@k: 2k); with fewer, the values are NaN and `notes` says why; there is no fallback to
    the in-sample oracle. table: the tidy per-sample table (run, task_id, passed, coverage)."""
    if not runs:
        raise ValueError("an oracle union needs at least one run and one task")
    c = crossfit.cells(table, list(runs))
    if not c.tasks:
        raise ValueError("an oracle union needs at least one run and one task")
    notes = _too_few(c, k)
    per_task = {m: np.full(len(c.tasks), np.nan) for m in METRICS}
    splits = 0
    if "pass_at_1" not in notes:
        fit = crossfit.cross_fit(c, k, n_splits, np.random.default_rng(seed))
        per_task, splits = {m: fit[m] for m in METRICS}, fit["splits"]
    frame = pd.DataFrame(per_task, index=pd.Index(c.tasks, name="task_id"))
    return {"runs": list(runs), "n_tasks": len(c.tasks), "per_task": frame, "splits": splits, "notes": notes,
            **{m: float(frame[m].mean()) if not frame[m].isna().any() else float("nan") for m in METRICS}}


def identical_experts_null(table: pd.DataFrame, runs: list[str], k: int | None = None, n_null: int = N_NULL,
                           n_splits: int = NULL_SPLITS, alpha: float = 0.05, seed: int = 0) -> dict:
    """The headroom (cross-fitted oracle - best single run) that runs with no complementarity at
    all would show on these tasks: each task's samples of all runs are pooled and dealt back at
    random, every run keeping its count (a permutation: no sample is repeated, so none can leak from
    the choosing half into the scoring half, and the noise is the data's), n_null times. Per metric:
    the null's mean, sd and (alpha/2, 1 - alpha/2) quantiles over the dealings; NaN where the
    metric cannot be cross-fitted."""
    c = crossfit.cells(table, list(runs))
    notes = _too_few(c, k)
    rng = np.random.default_rng(seed)
    draws = {m: [] for m in METRICS}
    for _ in range(n_null if "pass_at_1" not in notes else 0):
        d = crossfit.dealt(c, rng)
        fit, single = crossfit.cross_fit(d, k, n_splits, rng), crossfit.singles(d, k)
        for m in METRICS:
            draws[m].append(fit[m].mean() - single[m].mean(axis=0).max())
    out = {}
    for m in METRICS:
        v = np.asarray(draws[m], dtype=float)
        v = v[~np.isnan(v)]
        out[m] = ({"mean": float(v.mean()), "sd": float(v.std(ddof=1)) if len(v) > 1 else float("nan"),
                   "interval": tuple(float(q) for q in np.quantile(v, [alpha / 2, 1 - alpha / 2]))} if len(v)
                  else {"mean": float("nan"), "sd": float("nan"), "interval": (float("nan"), float("nan"))})
    return out


def oracle_headroom(table: pd.DataFrame, runs: list[str], k: int | None = None, n_boot: int = N_BOOT,
                    alpha: float = 0.05, seed: int = 0, n_splits: int = N_SPLITS, n_null: int = N_NULL) -> dict:
    """The cross-fitted oracle of `runs`, its headroom over the best single run, and whether that
    headroom is claimed. Per metric m (pass_at_1, mean_coverage, pass_at_k):
    m, m_ci (the oracle and its percentile bootstrap over tasks); best_single_m, the highest mean
    of one run over all its samples (the table's best expert): one choice among a few runs, each
    averaged over every task, so its winner's curse is small, lowers the headroom rather than
    raising it; headroom_m = m - best_single_m and headroom_m_ci (bootstrap over tasks of the
    oracle minus that run, the run kept fixed: re-choosing the max in every resample would add its
    winner's curse a second time); claimed_m: the lower end of headroom_m_ci above 0 (see
    headroom_claim, the rule this applies). The null of identical experts is a reference beside it,
    not the test: null_headroom_m (its mean), null_headroom_m_sd, null_headroom_m_interval and
    beyond_null_m (the lower end above the null's mean: the rule before issue 27, which calls
    clearly ranked experts complementary too often). Also per_task (the oracle's per-task values),
    singles (per task and run), notes (metric -> why it is NaN), best_single (by Pass@1) and
    in_sample_m."""
    c = crossfit.cells(table, list(runs))
    fit = cross_fitted_oracle(table, runs, k, n_splits, seed)
    null = identical_experts_null(table, runs, k, n_null, NULL_SPLITS, alpha, seed + 1)
    single = crossfit.singles(c, k)
    ci = dict(n_boot=n_boot, alpha=alpha, seed=seed)
    out = {"runs": list(runs), "n_tasks": fit["n_tasks"], "splits": fit["splits"], "notes": fit["notes"],
           "per_task": fit["per_task"], "singles": single, "null": null,
           "best_single": runs[int(np.argmax(single["pass_at_1"].mean(axis=0)))]}
    for m in METRICS:
        o = fit["per_task"][m].to_numpy()
        means = single[m].mean(axis=0)
        out[m], out[f"{m}_ci"] = fit[m], bootstrap_ci(o, lambda x: float(x.mean()), **ci)
        out[f"best_single_{m}"] = float(np.max(means)) if not np.isnan(means).any() else float("nan")
        out[f"in_sample_{m}"] = (float(np.max(single[m], axis=1).mean()) if not np.isnan(single[m]).any()
                                 else float("nan"))
        h = _headroom(o, single[m], ci)
        out[f"headroom_{m}"], out[f"headroom_{m}_ci"], out[f"claimed_{m}"] = h["headroom"], h["ci"], h["claimed"]
        nan = np.isnan(out[f"headroom_{m}"])
        out[f"null_headroom_{m}"] = null[m]["mean"]
        out[f"null_headroom_{m}_sd"], out[f"null_headroom_{m}_interval"] = null[m]["sd"], null[m]["interval"]
        out[f"beyond_null_{m}"] = bool(not nan and out[f"headroom_{m}_ci"][0] > null[m]["mean"])
    return out


def versus_best(consolidated: np.ndarray, oracle: dict, metric: str = "pass_at_1", n_boot: int = N_BOOT,
                alpha: float = 0.05, seed: int = 0) -> dict:
    """A consolidated model (its per-task values, in the order of oracle's tasks) against the best
    expert: delta = its mean minus the best expert's, delta_ci the paired bootstrap over tasks (the
    best expert kept fixed, as for the headroom), whatever the headroom. The gap recovery
    delta / headroom is given only where the headroom is claimed, and only as a bracket:
    recovery = (delta / in-sample headroom, delta / cross-fitted headroom). The in-sample oracle
    counts noise as headroom (too high) and the cross-fitted one chooses on half the samples (too
    low), so up to noise the true ratio lies between the two; no interval is put on the ratio (a
    bootstrap that keeps only resamples with headroom would be conditioned on its own draws)."""
    cons = np.asarray(consolidated, dtype=float)
    h = _headroom(cons, oracle["singles"][metric], dict(n_boot=n_boot, alpha=alpha, seed=seed))
    recovery = (float("nan"), float("nan"))
    if h["best"] is not None and oracle[f"claimed_{metric}"]:
        recovery = tuple(gap_recovery(float(cons.mean()), oracle[f"best_single_{metric}"], oracle[key])
                         for key in (f"in_sample_{metric}", metric))
    return {"delta": h["headroom"], "delta_ci": h["ci"], "recovery": recovery}


def _headroom(oracle_per_task: np.ndarray, singles: np.ndarray, ci: dict) -> dict:
    """Oracle (or any per-task values) minus the best single run (by mean, kept fixed): per task
    (`diff`), its mean, its bootstrap interval over tasks, and the claim: the interval's lower end
    above 0."""
    means = singles.mean(axis=0)
    nan = float("nan")
    if np.isnan(oracle_per_task).any() or np.isnan(means).any():
        return {"headroom": nan, "ci": (nan, nan), "claimed": False, "best": None, "diff": None}
    best = int(np.argmax(means))
    diff = oracle_per_task - singles[:, best]
    lo_hi = bootstrap_mean_ci(diff, **ci)
    return {"headroom": float(diff.mean()), "ci": lo_hi, "claimed": bool(lo_hi[0] > 0), "best": best, "diff": diff}


def headroom_claim(table: pd.DataFrame, runs: list[str], metric: str = "pass_at_1", k: int | None = None,
                   n_boot: int = N_BOOT, alpha: float = 0.05, n_splits: int = N_SPLITS, seed: int = 0) -> dict:
    """The claim rule for complementarity, for one metric: the cross-fitted headroom (oracle minus
    the best single run, that run fixed) with its percentile bootstrap interval over tasks, and
    claimed = its lower bound > 0. Under any dominance (one run at least as good as every other on
    every task) the cross-fitted headroom's expectation is <= 0: the oracle scores the run chosen on
    other samples, which is in expectation no better than the dominant run there. So a lower bound
    above 0 is a test at level alpha/2 whatever the runs' levels, unlike a comparison with the null
    of identical experts, whose winner's curse clearly ranked runs do not share. oracle_headroom
    applies the same rule to every metric (claimed_<metric>); this is its quick form (no null).
    Also: per_task (the headroom per task, a Series over task_id; None where undefined), oracle_per_task,
    means (each run's mean) and singles (per task and run, every metric: what versus_best reads)."""
    fit = cross_fitted_oracle(table, runs, k, n_splits, seed)
    singles = crossfit.singles(crossfit.cells(table, list(runs)), k)
    oracle = fit["per_task"][metric]
    h = _headroom(oracle.to_numpy(), singles[metric], dict(n_boot=n_boot, alpha=alpha, seed=seed))
    diff = h.pop("diff")
    per_task = pd.Series(diff, index=oracle.index) if diff is not None else None
    return {**h, "best": runs[h["best"]] if h["best"] is not None else None, "notes": fit["notes"],
            "per_task": per_task, "oracle_per_task": oracle, "singles": singles,
            "means": dict(zip(runs, map(float, singles[metric].mean(axis=0))))}
