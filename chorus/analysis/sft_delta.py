"""Each RL expert against the SFT stage it started from: what RL added, task by task.

An expert (job=rl, sft_stage=stageN) is paired with the loaded SFT run of the same stage (job=sft,
sft_stage=stageN); when several SFT runs of that stage are loaded, the one with the expert's seed;
when that still leaves none or several, the expert gets no delta rather than a guessed pairing.
The deltas are paired over tasks: the bootstrap resamples tasks and keeps both runs' values of a task.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

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


def sft_deltas(P: pd.DataFrame, C: pd.DataFrame, starts: dict[str, str], n_boot: int = 1000, alpha: float = 0.05,
               seed: int = 0) -> dict[str, dict]:
    """Per expert in `starts` whose SFT run is in the task matrices: `sft_start` (its label),
    `delta_pass_at_1` (in [0, 1]) and `delta_coverage` (points), expert minus SFT stage, each with a
    paired bootstrap interval over tasks (`*_ci`)."""
    ci = dict(n_boot=n_boot, alpha=alpha, seed=seed)
    out = {}
    for expert, start in starts.items():
        if expert not in P or start not in P:
            continue
        row = {"sft_start": start}
        for name, m in (("delta_pass_at_1", P), ("delta_coverage", C)):
            pair = m[[expert, start]].to_numpy(float)
            row[name] = _mean_diff(pair) if len(pair) else math.nan
            row[f"{name}_ci"] = bootstrap_ci(pair, _mean_diff, **ci)
        out[expert] = row
    return out
