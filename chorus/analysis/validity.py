"""How often a run wrote a valid sample, and its coverage over those samples alone.

Mean coverage over all samples counts an invalid sample as 0, so it mixes two things: how often
the model writes stimulus that runs, and how much that stimulus covers. These columns split them.

A sample is valid when its stimulus parsed, was accepted, compiled and was simulated: status
`ok`, or `runtime_error` (built and ran, then crashed or hit a limit; its coverage is kept where
the simulation wrote one, as the reward keeps it). Invalid: `empty` (no stimulus block parsed, or
it drives nothing), `rejected` (refused before building), `compile_error`, `timeout` (the status
does not tell a build timeout from a run timeout, so it is not counted as compiled), `missing`.

`harness_error` samples (chorus's failures, not the model's) are counted as invalid and stay in
every denominator, as the runs' summaries count them (n_samples, pass rate, mean_overall as 0):
the three coverage/validity columns then share one denominator, so validity x coverage over valid
samples is coverage over all samples whenever invalid samples have no coverage. Their number is
reported beside (`harness_errors`) so that a harness problem is not read as the model's.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..core.stats import N_BOOT
from .bootstrap import bootstrap_ci
from .matrix import run_order

VALID_STATUSES = ("ok", "runtime_error")
VALIDITY_NOTE = (f"A sample is valid when its stimulus parsed, compiled and was simulated (status "
                 f"{' or '.join(VALID_STATUSES)}; a harness error counts as invalid, as in the runs' summaries); "
                 "mean coverage over valid samples pools the valid samples of all tasks.")


def _ratio(m: np.ndarray) -> float:  # pooled, not a mean of per-task means: a task may have no valid sample
    # column 0: coverage summed over valid samples; column 1: their count
    n = m[:, 1].sum()
    return float(m[:, 0].sum() / n) if n else math.nan


def validity_stats(table: pd.DataFrame, n_boot: int = N_BOOT, alpha: float = 0.05,
                   seed: int = 0) -> dict[str, dict]:
    """Per run: `validity` (mean over tasks of the share of valid samples), `coverage_valid`
    (coverage in percent pooled over the valid samples of all tasks; NaN when none is valid),
    both with percentile bootstrap intervals over tasks (`*_ci`), and `harness_errors` (a count).
    A table without a `status` column gives NaN validity columns."""
    out: dict[str, dict] = {}
    if "status" not in table:
        nan = (math.nan, math.nan)
        return {r: {"validity": math.nan, "validity_ci": nan, "coverage_valid": math.nan, "coverage_valid_ci": nan,
                    "harness_errors": math.nan} for r in run_order(table)}
    t = table.assign(_valid=table["status"].isin(VALID_STATUSES))
    t = t.assign(_cov_valid=t["coverage"].where(t["_valid"], 0.0))
    per_task = t.groupby(["run", "task_id"], sort=False).agg(share=("_valid", "mean"), cov=("_cov_valid", "sum"),
                                                             n=("_valid", "sum"))
    ci = dict(n_boot=n_boot, alpha=alpha, seed=seed)
    for r in run_order(t):
        g = per_task.loc[r]
        out[r] = {"validity": float(g["share"].mean()),
                  "validity_ci": bootstrap_ci(g["share"], lambda m: float(m.mean()), **ci),
                  "coverage_valid": _ratio(g[["cov", "n"]].to_numpy(float)),
                  "coverage_valid_ci": bootstrap_ci(g[["cov", "n"]], _ratio, **ci),
                  "harness_errors": int((t.loc[t["run"] == r, "status"] == "harness_error").sum())}
    return out
