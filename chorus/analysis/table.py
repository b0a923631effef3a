"""The CHORUS table: each expert, their cross-fitted oracle union (with its headroom, whether it is
claimed, and a null of identical experts beside it), each consolidated model (against the best
expert, and its gap recovery bracket where the headroom is claimed), with bootstrap confidence
intervals over tasks."""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..core.stats import N_BOOT
from .bootstrap import bootstrap_ci, bootstrap_mean_ci
from .complementarity import solved_sets, unique_solves
from .matrix import align_tasks, pass_at_k_matrix, task_matrix
from .oracle import oracle_headroom, oracle_union, versus_best
from .sft_delta import random_deltas, sft_deltas, sft_starts
from .validity import validity_stats

ORACLE = "oracle union (experts)"
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


def student_run(runs: pd.DataFrame, run: str) -> str | None:
    """The loaded run whose dir holds the checkpoint `run` started from (an OPD run's `student`, e.g.
    the stage-1 expert's hf/), or None (no student recorded, or one no loaded run made: the soup)."""
    info = runs.set_index("run")
    student = info.loc[run, "student"] if "student" in info and run in info.index else None
    if not isinstance(student, str) or not student:
        return None
    target = Path(student).resolve()
    for other, path in info["path"].items():
        if other != run and isinstance(path, str) and target.is_relative_to(Path(path).resolve()):
            return other
    return None


def chorus_table(table: pd.DataFrame, runs: pd.DataFrame, experts: list[str] | None = None, k: int = 5,
                 min_rate: float = 0.5, n_boot: int = N_BOOT, alpha: float = 0.05, seed: int = 0) -> pd.DataFrame:
    """One row per run plus the experts' oracle union. Pass@1 and coverage in [0, 1] and percent.

    The oracle row is the cross-fitted oracle union (oracle.oracle_headroom: each task's expert is
    chosen on half its samples and scored on the other half), with headroom_* columns: its headroom
    over the best expert with a bootstrap interval, claimed_* (complementarity is claimed: the
    interval's lower end above 0), and null_headroom_* / beyond_null_* (the null of identical
    experts, a reference); oracle_notes says why a value is NaN (too few samples per task).
    Consolidated rows get vs_best* (their mean minus the best expert's, paired interval over tasks)
    and, only where the headroom is claimed, gap_recovery*_bracket: (against the in-sample oracle,
    against the cross-fitted one); up to noise the true ratio lies between the two. An OPD run whose
    student is a loaded run (student_run) also gets vs_student* (paired, over tasks). `solved` on
    the oracle row is the in-sample union of the experts' solved sets."""
    t = align_tasks(table)
    experts = choose_experts(runs, experts)
    P, C = task_matrix(t, "passed"), task_matrix(t, "coverage")
    counts = t.groupby(["run", "task_id"]).size()
    K = pass_at_k_matrix(t, k) if k > 1 and counts.min() >= k else None
    sets = solved_sets(P, min_rate)
    unique = unique_solves({e: sets[e] for e in experts})
    union = oracle_union(P[experts], min_rate=min_rate)  # the solved union only: the values are cross-fitted
    oracle = oracle_headroom(t, experts, k if k > 1 else None, n_boot=n_boot, alpha=alpha, seed=seed)
    order = oracle["per_task"].index
    ci = dict(n_boot=n_boot, alpha=alpha, seed=seed)
    valid = validity_stats(t, **ci)  # validity, coverage over valid samples, harness errors (validity.py)
    deltas = sft_deltas(P, C, sft_starts(runs), **ci)  # each expert minus its SFT start (sft_delta.py)
    vs_random = random_deltas(P, C, runs, **ci)  # every run minus uniform random stimulus, if loaded
    mean = lambda m: float(m.mean())  # noqa: E731
    job = dict(zip(runs["run"], runs["job"]))
    rows = []
    for r in P.columns:
        kind = ("expert" if r in experts else "consolidated" if job.get(r) == "consolidation"
                else "sft stage" if job.get(r) == "sft" else "other")
        row = {"run": r, "kind": kind, "n_tasks": len(P), "pass_at_1": P[r].mean(),
               "pass_at_1_ci": bootstrap_ci(P[r], mean, **ci), "mean_coverage": C[r].mean(),
               "mean_coverage_ci": bootstrap_ci(C[r], mean, **ci), **valid[r], **deltas.get(r, {}),
               **vs_random.get(r, {}),
               **({f"pass_at_{k}": K[r].mean() if K is not None else math.nan} if k > 1 else {}),
               "solved": len(sets[r]),
               "unique": len(unique[r]) if r in unique else None}
        if kind == "consolidated":
            for m, suffix, values in (("pass_at_1", "", P[r]), ("mean_coverage", "_coverage", C[r])):
                v = versus_best(values.reindex(order).to_numpy(), oracle, m, **ci)
                row[f"vs_best{suffix}"], row[f"vs_best{suffix}_ci"] = v["delta"], v["delta_ci"]
                row[f"gap_recovery{suffix}_bracket"] = v["recovery"]
            if (start := student_run(runs, r)) is not None:
                row["student_run"] = start
                for suffix, M in (("", P), ("_coverage", C)):
                    diff = (M[r] - M[start]).to_numpy()
                    row[f"vs_student{suffix}"] = float(diff.mean())
                    row[f"vs_student{suffix}_ci"] = bootstrap_mean_ci(diff, **ci)
        rows.append(row)
    rows.append({"run": ORACLE, "kind": "oracle", "n_tasks": len(P), "pass_at_1": oracle["pass_at_1"],
                 "pass_at_1_ci": oracle["pass_at_1_ci"], "mean_coverage": oracle["mean_coverage"],
                 "mean_coverage_ci": oracle["mean_coverage_ci"],
                 **({f"pass_at_{k}": oracle["pass_at_k"]} if k > 1 else {}),
                 "solved": round(union["solved_union"] * len(P)), "unique": None, **oracle_columns(oracle)})
    out = pd.DataFrame(rows)
    return out.sort_values("kind", key=lambda s: s.map(KIND_ORDER), kind="stable").reset_index(drop=True)


def oracle_columns(oracle: dict) -> dict:
    """The oracle row's headroom columns (suffix "" for Pass@1, "_coverage", "_pass_at_k")."""
    cols = {"oracle_notes": "; ".join(dict.fromkeys(oracle["notes"].values())) or None,  # one metric's reason once
            "in_sample_pass_at_1": oracle["in_sample_pass_at_1"],
            "in_sample_mean_coverage": oracle["in_sample_mean_coverage"]}
    for m, suffix in (("pass_at_1", ""), ("mean_coverage", "_coverage"), ("pass_at_k", "_pass_at_k")):
        cols.update({f"headroom{suffix}": oracle[f"headroom_{m}"], f"headroom{suffix}_ci": oracle[f"headroom_{m}_ci"],
                     f"null_headroom{suffix}": oracle[f"null_headroom_{m}"],
                     f"null_headroom{suffix}_interval": oracle[f"null_headroom_{m}_interval"],
                     f"claimed{suffix}": oracle[f"claimed_{m}"], f"beyond_null{suffix}": oracle[f"beyond_null_{m}"]})
    return cols


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
        "Δ Pass@1 vs best expert, points": [_signed(v, c, 100) if kind == "consolidated" else ""
                                           for v, c, kind in zip(df.get("vs_best", [None] * len(df)),
                                                                 df.get("vs_best_ci", [None] * len(df)), df["kind"])],
        "gap recovery % (Pass@1), in-sample to cross-fitted": [
            _bracket(b) if kind == "consolidated" else ""
            for b, kind in zip(df.get("gap_recovery_bracket", [None] * len(df)), df["kind"])],
    })
    return show.to_markdown(index=False)


def _bracket(b) -> str:
    """A gap recovery bracket (in-sample ratio, cross-fitted ratio) in percent; "" when undefined."""
    if not isinstance(b, tuple) or any(x != x for x in b):
        return ""
    return f"{100 * b[0]:.0f} to {100 * b[1]:.0f}"


def _signed(v, ci, scale: float) -> str:
    if v is None or v != v:
        return ""
    text = f"{scale * v:+.1f}"
    return text if not isinstance(ci, tuple) or any(x != x for x in ci) else \
        f"{text} [{scale * ci[0]:+.1f}, {scale * ci[1]:+.1f}]"


def _delta_markdown(df: pd.DataFrame, prefix: str, alpha: float, extra: dict[str, str] | None = None) -> str:
    """The runs with a `<prefix>coverage` value: Pass@1 and coverage deltas in points with their paired
    intervals, after the `extra` columns (table column -> label); "" when there are none."""
    if f"{prefix}coverage" not in df:
        return ""
    rows = df[df[f"{prefix}coverage"].notna()]
    if rows.empty:
        return ""
    level = f"{100 * (1 - alpha):.0f}%"
    cells = {"run": rows["run"], **{label: rows[col] for col, label in (extra or {}).items()}}
    for metric, name, scale in (("pass_at_1", "Pass@1", 100), ("coverage", "mean coverage", 1)):
        cells[f"Δ {name} points [{level} CI]"] = [_signed(v, c, scale) for v, c in
                                                  zip(rows[f"{prefix}{metric}"], rows[f"{prefix}{metric}_ci"])]
    return pd.DataFrame(cells).to_markdown(index=False)


def sft_delta_markdown(df: pd.DataFrame, alpha: float = 0.05) -> str:
    """Each expert against the SFT stage it started from, in points with paired intervals; "" when
    no loaded expert has its SFT start loaded too."""
    return _delta_markdown(df, "delta_", alpha, {"sft_start": "SFT start"})


def random_delta_markdown(df: pd.DataFrame, alpha: float = 0.05) -> str:
    """Every run against uniform random stimulus on the same tasks, in points with paired intervals;
    "" when no single random-stimulus run is loaded."""
    return _delta_markdown(df, "vs_random_", alpha)


def headroom_markdown(df: pd.DataFrame, alpha: float = 0.05, mde: dict[str, float] | None = None) -> str:
    """The oracle row's headroom, one line per metric: the headroom with its interval, whether
    complementarity is claimed (lower end above 0) or not detected (with the minimum detectable
    headroom at 80 % power beside it where `mde` gives one, by metric suffix), and the null of
    identical experts for reference ("undefined" where it cannot be cross-fitted: oracle_notes
    says why)."""
    o = df[df["kind"] == "oracle"].iloc[0]
    level = f"{100 * (1 - alpha):.0f}%"
    k_col = next((c for c in df.columns if c.startswith("pass_at_") and c != "pass_at_1" and not c.endswith("_ci")),
                 None)
    metrics = [("Pass@1", "", 100.0), ("mean coverage", "_coverage", 1.0)]
    metrics += [(k_col.replace("pass_at_", "pass@"), "_pass_at_k", 100.0)] if k_col else []
    lines = []
    for name, suffix, scale in metrics:
        h, ci = o[f"headroom{suffix}"], o[f"headroom{suffix}_ci"]
        null, spread = o[f"null_headroom{suffix}"], o[f"null_headroom{suffix}_interval"]
        if h != h:
            lines.append({"metric": name, "a": "undefined", "c": "undefined", "b": "undefined"})
            continue
        floor = (mde or {}).get(suffix)
        verdict = "claimed" if o[f"claimed{suffix}"] else (
            "not detected" + (f" (MDE {scale * floor:.1f} points)" if floor is not None and floor == floor else
                              " (MDE above every headroom these levels allow)" if floor is not None else ""))
        lines.append({"metric": name, "a": f"{scale * h:+.1f} [{scale * ci[0]:+.1f}, {scale * ci[1]:+.1f}]",
                      "c": verdict,
                      "b": f"{scale * null:+.1f} [{scale * spread[0]:+.1f}, {scale * spread[1]:+.1f}]"})
    return pd.DataFrame(lines).rename(columns={
        "a": f"headroom over the best expert, points [{level} CI]",
        "c": "complementarity (lower bound > 0)",
        "b": f"reference: null of identical experts, mean [{level} of its draws]"}).to_markdown(index=False)
