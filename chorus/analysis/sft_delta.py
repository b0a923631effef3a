"""Paired deltas over tasks: each RL expert against the SFT stage it started from (what RL added),
and every run against uniform random stimulus (what a model adds over no model at all).

An expert (job=rl, sft_stage=stageN) is paired with the loaded SFT run of the same stage (job=sft,
sft_stage=stageN); when several SFT runs of that stage are loaded, the one with the expert's seed;
when that still leaves none or several, the expert gets no delta rather than a guessed pairing.
The deltas are paired over tasks: the bootstrap resamples tasks and keeps both runs' values of a task.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..core.stats import N_BOOT
from .bootstrap import bootstrap_ci


def sft_starts(runs: pd.DataFrame) -> dict[str, str]:
    """RL run label -> the label of the SFT run it started from, for the runs where that is unambiguous."""
    if not {"job", "sft_stage"} <= set(runs.columns):
        return {}
    sft = runs[runs["job"] == "sft"]
    pairs = {}
    for _, r in runs[(runs["job"] == "rl") & runs["sft_stage"].notna()].iterrows():
        same = sft[sft["sft_stage"] == r["sft_stage"]]
        if len(same) > 1 and "seed" in same:
            same = same[same["seed"] == r["seed"]]
        if len(same) == 1:
            pairs[r["run"]] = same["run"].iloc[0]
    return pairs


def _mean_diff(m: np.ndarray) -> float:  # column 0: the expert; column 1: its SFT start
    return float((m[:, 0] - m[:, 1]).mean())


def random_baseline(runs: pd.DataFrame) -> str | None:
    """The label of the one loaded uniform-random-stimulus run (chorus.evaluate policy=random), else None
    (none loaded, or several: then no guess)."""
    if not {"job", "policy"} <= set(runs.columns):
        return None
    found = runs.loc[(runs["job"] == "evaluate") & (runs["policy"] == "random"), "run"]
    return found.iloc[0] if len(found) == 1 else None


def paired_deltas(P: pd.DataFrame, C: pd.DataFrame, pairs: dict[str, str], n_boot: int = N_BOOT, alpha: float = 0.05,
                  seed: int = 0) -> dict[str, dict]:
    """Per run in `pairs` (run -> the run it is compared with) whose both runs are in the task
    matrices: `delta_pass_at_1` (in [0, 1]) and `delta_coverage` (points), run minus the other, each
    with a paired bootstrap interval over tasks (`*_ci`)."""
    ci = dict(n_boot=n_boot, alpha=alpha, seed=seed)
    out = {}
    for run, other in pairs.items():
        if run not in P or other not in P:
            continue
        row = {}
        for name, m in (("delta_pass_at_1", P), ("delta_coverage", C)):
            pair = m[[run, other]].to_numpy(float)
            row[name] = _mean_diff(pair) if len(pair) else math.nan
            row[f"{name}_ci"] = bootstrap_ci(pair, _mean_diff, **ci)
        out[run] = row
    return out


def sft_deltas(P: pd.DataFrame, C: pd.DataFrame, starts: dict[str, str], **ci) -> dict[str, dict]:
    """Per expert in `starts` whose SFT run is in the task matrices: `sft_start` (its label) and the
    paired deltas, expert minus SFT stage."""
    return {e: {"sft_start": starts[e], **d} for e, d in paired_deltas(P, C, starts, **ci).items()}


def random_deltas(P: pd.DataFrame, C: pd.DataFrame, runs: pd.DataFrame, **ci) -> dict[str, dict]:
    """Every run against the loaded random-stimulus run: `vs_random_pass_at_1`, `vs_random_coverage`
    and their intervals ({} when no single random run is loaded)."""
    base = random_baseline(runs)
    if base is None:
        return {}
    deltas = paired_deltas(P, C, {r: base for r in P.columns if r != base}, **ci)
    return {r: {k.replace("delta_", "vs_random_"): v for k, v in d.items()} for r, d in deltas.items()}
