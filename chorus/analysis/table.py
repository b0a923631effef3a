"""The CHORUS table: each expert, their oracle union, each consolidated model (with gap recovery),
with bootstrap confidence intervals over tasks."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .bootstrap import bootstrap_ci
from .complementarity import solved_sets, unique_solves
from .matrix import align_tasks, pass_at_k_matrix, task_matrix
from .oracle import gap_recovery, oracle_union
from .sft_delta import sft_deltas, sft_starts
from .validity import validity_stats

ORACLE = "oracle union (experts)"
MIN_COVERAGE_HEADROOM = 1.0  # points of mean coverage
KIND_ORDER = {"sft stage": 0, "expert": 1, "oracle": 2, "consolidated": 3, "other": 4}


def choose_experts(runs: pd.DataFrame, experts: list[str] | None = None) -> list[str]:
    """The runs whose oracle union is the headroom: given labels, else the job=rl runs, else every
    run that is not a consolidation."""
    labels = list(runs["run"])
    if experts:
        unknown = [e for e in experts if e not in labels]
        if unknown:
            raise ValueError(f"experts {unknown} are not among the loaded runs {labels}")
        return list(experts)
    chosen = list(runs.loc[runs["job"] == "rl", "run"])
    return chosen or list(runs.loc[runs["job"] != "consolidation", "run"])


def _gap_stat(min_headroom: float):
    def stat(m: np.ndarray) -> float:  # column 0: the consolidated run; the rest: the experts
        return gap_recovery(m[:, 0].mean(), m[:, 1:].mean(axis=0).max(), m[:, 1:].max(axis=1).mean(), min_headroom)
    return stat


def chorus_table(table: pd.DataFrame, runs: pd.DataFrame, experts: list[str] | None = None, k: int = 5,
                 min_rate: float = 0.5, n_boot: int = 1000, alpha: float = 0.05, seed: int = 0) -> pd.DataFrame:
    """One row per run plus the experts' oracle union. Pass@1 and coverage in [0, 1] and percent.

    Gap recovery is left undefined (NaN) when the oracle beats the best expert by less than one
    task's worth of Pass@1 (1 / tasks), or by less than 1 point of coverage: a ratio over noise."""
    t = align_tasks(table)
    experts = choose_experts(runs, experts)
    P, C = task_matrix(t, "passed"), task_matrix(t, "coverage")
    counts = t.groupby(["run", "task_id"]).size()
    K = pass_at_k_matrix(t, k) if k > 1 and counts.min() >= k else None
    sets = solved_sets(P, min_rate)
    unique = unique_solves({e: sets[e] for e in experts})
    oracle = oracle_union(P[experts], C[experts], K[experts] if K is not None else None, min_rate)
    ci = dict(n_boot=n_boot, alpha=alpha, seed=seed)
    valid = validity_stats(t, **ci)  # validity, coverage over valid samples, harness errors (validity.py)
    deltas = sft_deltas(P, C, sft_starts(runs), **ci)  # each expert minus its SFT start (sft_delta.py)
    mean = lambda m: float(m.mean())  # noqa: E731
    best_of = lambda m: float(m.max(axis=1).mean())  # noqa: E731
    job = dict(zip(runs["run"], runs["job"]))
    rows = []
    for r in P.columns:
        kind = ("expert" if r in experts else "consolidated" if job.get(r) == "consolidation"
                else "sft stage" if job.get(r) == "sft" else "other")
        row = {"run": r, "kind": kind, "n_tasks": len(P), "pass_at_1": P[r].mean(),
               "pass_at_1_ci": bootstrap_ci(P[r], mean, **ci), "mean_coverage": C[r].mean(),
               "mean_coverage_ci": bootstrap_ci(C[r], mean, **ci), **valid[r], **deltas.get(r, {}),
               **({f"pass_at_{k}": K[r].mean() if K is not None else math.nan} if k > 1 else {}),
               "solved": len(sets[r]),
               "unique": len(unique[r]) if r in unique else None}
        if kind == "consolidated":
            one_task = 1 / len(P)
            row["gap_recovery"] = gap_recovery(P[r].mean(), oracle["best_single_pass_at_1"], oracle["pass_at_1"],
                                               one_task)
            row["gap_recovery_ci"] = bootstrap_ci(pd.concat([P[r], P[experts]], axis=1), _gap_stat(one_task), **ci)
            row["gap_recovery_coverage"] = gap_recovery(C[r].mean(), oracle["best_single_coverage"],
                                                        oracle["mean_coverage"], MIN_COVERAGE_HEADROOM)
        rows.append(row)
    rows.append({"run": ORACLE, "kind": "oracle", "n_tasks": len(P), "pass_at_1": oracle["pass_at_1"],
                 "pass_at_1_ci": bootstrap_ci(P[experts], best_of, **ci), "mean_coverage": oracle["mean_coverage"],
                 "mean_coverage_ci": bootstrap_ci(C[experts], best_of, **ci),
                 **({f"pass_at_{k}": oracle.get("pass_at_k", math.nan)} if k > 1 else {}),
                 "solved": round(oracle["solved_union"] * len(P)), "unique": None})
    out = pd.DataFrame(rows)
    return out.sort_values("kind", key=lambda s: s.map(KIND_ORDER), kind="stable").reset_index(drop=True)


def _pct(v) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}"


def _with_ci(v, ci) -> str:
    if not isinstance(ci, tuple) or any(math.isnan(x) for x in ci):
        return _pct(v)
    return f"{_pct(v)} [{_pct(ci[0])}, {_pct(ci[1])}]"


def _cov(v, ci) -> str:  # coverage is already in percent
    return _with_ci(None if v is None else v / 100, tuple(x / 100 for x in ci) if isinstance(ci, tuple) else ci)


def _validity_columns(df: pd.DataFrame, level: str) -> dict:
    """valid %, coverage over valid samples and, when any run had some, harness errors (validity.py)."""
    if "validity" not in df:
        return {}
    blank = [None] * len(df)
    cols = {f"valid % [{level} CI]": [_with_ci(v, c) for v, c in zip(df["validity"], df["validity_ci"])],
            f"mean coverage, valid samples % [{level} CI]": [_cov(v, c) for v, c in zip(df["coverage_valid"],
                                                                                      df["coverage_valid_ci"])]}
    harness = df.get("harness_errors", pd.Series(blank, dtype=float))
    if harness.fillna(0).gt(0).any():
        cols["harness errors"] = ["" if h != h or h is None else int(h) for h in harness]
    return cols


def to_markdown(df: pd.DataFrame, alpha: float = 0.05) -> str:
    """The table as markdown: percentages with [lo, hi] bootstrap intervals."""
    level = f"{100 * (1 - alpha):.0f}%"
    k_col = next((c for c in df.columns if c.startswith("pass_at_") and c != "pass_at_1" and not c.endswith("_ci")),
                 None)
    show = pd.DataFrame({
        "run": df["run"], "kind": df["kind"], "tasks": df["n_tasks"],
        f"Pass@1 % [{level} CI]": [_with_ci(v, c) for v, c in zip(df["pass_at_1"], df["pass_at_1_ci"])],
        f"mean coverage, all samples % [{level} CI]": [_cov(v, c) for v, c in zip(df["mean_coverage"],
                                                                                   df["mean_coverage_ci"])],
        **({k_col.replace("pass_at_", "pass@") + " %": [_pct(v) for v in df[k_col]]} if k_col else {}),
        **_validity_columns(df, level),
        "solved": df["solved"], "unique": [("" if u is None or u != u else int(u)) for u in df["unique"]],
        "gap recovery % (Pass@1)": [_with_ci(v, c) if kind == "consolidated" else ""
                                  for v, c, kind in zip(df.get("gap_recovery", [None] * len(df)),
                                                        df.get("gap_recovery_ci", [None] * len(df)), df["kind"])],
        "gap recovery % (coverage)": [_pct(v) if kind == "consolidated" else ""
                                    for v, kind in zip(df.get("gap_recovery_coverage", [None] * len(df)), df["kind"])],
    })
    return show.to_markdown(index=False)


def _signed(v, ci, scale: float) -> str:
    if v is None or v != v:
        return ""
    text = f"{scale * v:+.1f}"
    return text if not isinstance(ci, tuple) or any(x != x for x in ci) else \
        f"{text} [{scale * ci[0]:+.1f}, {scale * ci[1]:+.1f}]"


def sft_delta_markdown(df: pd.DataFrame, alpha: float = 0.05) -> str:
    """Each expert against the SFT stage it started from, in points with paired intervals; "" when
    no loaded expert has its SFT start loaded too."""
    if "sft_start" not in df:
        return ""
    rows = df[df["sft_start"].notna()]
    if rows.empty:
        return ""
    level = f"{100 * (1 - alpha):.0f}%"
    return pd.DataFrame({
        "run": rows["run"], "SFT start": rows["sft_start"],
        f"Δ Pass@1 points [{level} CI]": [_signed(v, c, 100) for v, c in zip(rows["delta_pass_at_1"],
                                                                              rows["delta_pass_at_1_ci"])],
        f"Δ mean coverage points [{level} CI]": [_signed(v, c, 1) for v, c in zip(rows["delta_coverage"],
                                                                                   rows["delta_coverage_ci"])],
    }).to_markdown(index=False)
