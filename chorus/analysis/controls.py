"""The staged study's controls and its pre-registered verdict (issue 27; the rule is docs/results.md's).

A pipeline run with pipeline.controls writes controls.json into its runs_dir: the run dirs of each
expert set (`staged`: one DAPO expert per SFT stage; `same_stage`: one stage's expert and more RL
seeds of it; `families`: experts fine-tuned on disjoint family groups, and `families_opd`, their
OPD consolidation). From those:
- each set's cross-fitted headroom (oracle.headroom_claim), per task and on average;
- staged minus same-stage headroom, paired over the common held-out tasks (one seed), and pooled over
  seeds as the mean of the per-seed means, the tasks resampled within each seed;
- the verdict: (a) premise, every staged expert within PREMISE_POINTS Pass@1 points of the best, on
  every seed; (b) headroom >= MIN_HEADROOM points with its lower bound > 0 on every seed; (c) the
  pooled staged-minus-same-stage headroom's lower bound > 0.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from .bootstrap import bootstrap_mean_ci
from .oracle import headroom_claim, versus_best
from ..tracking.run_dir import PARQUET, SUMMARY, TABLE
from .report import PREMISE_POINTS

CONTROLS_FILE = "controls.json"
MIN_HEADROOM = 3.0  # Pass@1 points: criterion (b)'s size
SETS = ("staged", "same_stage", "families")


def pooled_mean_ci(per_seed: list[np.ndarray], n_boot: int = 1000, alpha: float = 0.05,
                   seed: int = 0) -> tuple[float, tuple[float, float]]:
    """The mean over seeds of each seed's mean, and its percentile bootstrap interval with the tasks
    resampled within each seed (independently per seed): seeds are fixed, tasks are the sample."""
    arrays = [np.asarray(v, dtype=float) for v in per_seed]
    if not arrays or any(len(v) == 0 or np.isnan(v).any() for v in arrays):
        raise ValueError("every seed needs at least one task and no NaN values")
    rng = np.random.default_rng(seed)
    boots = np.mean([v[rng.integers(0, len(v), size=(n_boot, len(v)))].mean(axis=1) for v in arrays], axis=0)
    lo, hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
    return float(np.mean([v.mean() for v in arrays])), (float(lo), float(hi))


def load_sets(runs_dir: str | Path) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """The aligned per-sample table of a runs_dir's controls.json runs and each set's run labels."""
    from ..tracking.runs import load_run_dirs
    from .matrix import align_tasks

    sets, where = read_sets(runs_dir)
    runs = load_run_dirs(list(where.values()), f"the run dirs of {Path(runs_dir) / CONTROLS_FILE}")
    if runs.skipped:
        raise ValueError(f"{Path(runs_dir) / CONTROLS_FILE}: {runs.skipped[0][0]} has no results "
                         f"({runs.skipped[0][1]}); finish the pipeline")
    label = dict(zip(runs.runs["path"], runs.runs["run"]))
    named = {k: ([label[str(where[d])] for d in v] if isinstance(v, list) else label[str(where[v])])
             for k, v in sets.items()}
    return align_tasks(runs.table), named


def read_sets(runs_dir: str | Path) -> tuple[dict, dict[str, Path]]:
    """controls.json's sets as written, and where each run dir named in them is. Paths are relative
    to the runs_dir (so the folder can be moved or kept in a repository); files written before that
    named them relative to the working directory, which is still read."""
    path = Path(runs_dir) / CONTROLS_FILE
    try:
        sets = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}; run python -m chorus.pipeline pipeline=staged_controls first") from None
    named = dict.fromkeys(d for v in sets.values() for d in ([v] if isinstance(v, str) else v))
    where = {d: (Path(runs_dir) / d if not Path(d).is_absolute() and (Path(runs_dir) / d).is_dir() else Path(d))
             for d in named}
    return sets, where


def keep_evidence(runs_dir: str | Path, dest: str | Path) -> list[Path]:
    """Copy what the verdict reads from one seed's runs_dir into dest: controls.json and, for each run
    it names, summary.json and the per-task table (no checkpoints, no samples' text: a few hundred KB
    a seed, small enough to commit). `python -m chorus.analyze study=[dest,...]` then gives the same
    numbers. Returns the files written."""
    sets, where = read_sets(runs_dir)
    dest = Path(dest)
    rel = {d: Path(os.path.relpath(p, runs_dir)) for d, p in where.items()}
    if any(r.is_absolute() or ".." in r.parts for r in rel.values()):
        raise ValueError(f"{Path(runs_dir) / CONTROLS_FILE} names run dirs outside {runs_dir}; keep them under it")
    written = []
    for d, src in where.items():
        files = [f for f in (SUMMARY, PARQUET) if (src / f).exists()] or [SUMMARY, TABLE]
        for f in files:
            (dest / rel[d]).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / f, dest / rel[d] / f)
            written.append(dest / rel[d] / f)
    relative = {k: ([str(rel[d]) for d in v] if isinstance(v, list) else str(rel[v])) for k, v in sets.items()}
    (dest / CONTROLS_FILE).write_text(json.dumps(relative, indent=1))
    return [*written, dest / CONTROLS_FILE]


def seed_summary(runs_dir: str | Path, n_boot: int = 1000, alpha: float = 0.05, seed: int = 0) -> dict:
    """summarize() of the runs a runs_dir's controls.json names."""
    table, sets = load_sets(runs_dir)
    return {"runs_dir": str(runs_dir), **summarize(table, sets, n_boot, alpha, seed)}


def summarize(table: pd.DataFrame, sets: dict, n_boot: int = 1000, alpha: float = 0.05, seed: int = 0) -> dict:
    """One seed's controls from its aligned per-sample table and its sets (run labels): per set its
    Pass@1 headroom (per task and mean, with its bootstrap interval; `undefined` says why where it
    cannot be cross-fitted) and its runs' Pass@1; staged minus same_stage per task; the families'
    OPD against their best expert."""
    out: dict = {"sets": sets, "undefined": {}}
    for name in SETS:
        if sets.get(name):
            h = headroom_claim(table, sets[name], n_boot=n_boot, alpha=alpha, seed=seed)
            if h["per_task"] is None:
                note = next(iter(h["notes"].values()), "NaN values")
                out["undefined"][name] = f"the headroom of {sets[name]} is undefined: {note}"
            else:
                out[name] = h
    if "staged" in out and "same_stage" in out:
        d = out["staged"]["per_task"] - out["same_stage"]["per_task"]
        out["difference"] = {"per_task": d, "mean": float(d.mean()),
                             "ci": bootstrap_mean_ci(d.to_numpy(), n_boot, alpha, seed)}
    if "families" in out and sets.get("families_opd"):
        h = out["families"]  # versus_best reads the oracle_headroom keys; headroom_claim has them all
        oracle = {"singles": h["singles"], "claimed_pass_at_1": h["claimed"],
                  "best_single_pass_at_1": max(h["means"].values()), "pass_at_1": float(h["oracle_per_task"].mean()),
                  "in_sample_pass_at_1": float(np.max(h["singles"]["pass_at_1"], axis=1).mean())}
        passed = table[table["run"] == sets["families_opd"]].groupby("task_id")["passed"].mean()
        out["families_opd"] = versus_best(passed.reindex(h["per_task"].index).to_numpy(), oracle, "pass_at_1", n_boot,
                                          alpha, seed)
    return out


def verdict(summaries: list[dict], n_boot: int = 1000, alpha: float = 0.05, seed: int = 0) -> dict:
    """The pre-registered rule over the seeds' summaries: (a) premise, (b) complementarity, (c)
    staging matters (pooled), each True/False with the numbers it rests on; `claim` when all hold."""
    missing = [f"{s.get('runs_dir', i)}: {why}" for i, s in enumerate(summaries) for why in s["undefined"].values()]
    if missing or not all("staged" in s for s in summaries):
        raise ValueError(f"the verdict needs every seed's staged headroom; {missing[0] if missing else 'no staged set'}")
    spreads = [100 * (max(s["staged"]["means"].values()) - min(s["staged"]["means"].values())) for s in summaries]
    heads = [(100 * s["staged"]["headroom"], 100 * s["staged"]["ci"][0]) for s in summaries]
    out = {"seeds": len(summaries), "spreads": spreads, "headrooms": heads,
           "a": all(x <= PREMISE_POINTS for x in spreads),
           "b": all(h >= MIN_HEADROOM and lo > 0 for h, lo in heads)}
    diffs = [s["difference"]["per_task"].to_numpy() for s in summaries if "difference" in s]
    if len(diffs) == len(summaries) and diffs:
        mean, ci = pooled_mean_ci(diffs, n_boot, alpha, seed)
        out["pooled_difference"], out["pooled_ci"], out["c"] = 100 * mean, (100 * ci[0], 100 * ci[1]), ci[0] > 0
    else:
        out["pooled_difference"], out["pooled_ci"], out["c"] = float("nan"), (float("nan"),) * 2, False
        out["missing_same_stage"] = next(i for i, s in enumerate(summaries) if "difference" not in s)
    out["claim"] = bool(out["a"] and out["b"] and out["c"])
    return out


def _pts(v: float, ci: tuple[float, float] | None = None) -> str:
    text = f"{100 * v:+.1f}"
    return text + (f" [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]" if ci is not None else "")


def controls_markdown(s: dict) -> str:
    """REPORT.md's Controls section for one seed's summary."""
    rows = ["| expert set | runs (Pass@1 %) | cross-fitted headroom, Pass@1 points [95% CI] | claimed |",
            "|---|---|---|---|"]
    for name in SETS:
        if name in s:
            runs = ", ".join(f"{r} ({100 * m:.1f})" for r, m in s[name]["means"].items())
            rows.append(f"| {name} | {runs} | {_pts(s[name]['headroom'], s[name]['ci'])} | "
                        f"{'yes' if s[name]['ci'][0] > 0 else 'no'} |")
    lines = ["Each set's cross-fitted oracle union against its best expert (claimed: the interval's lower end "
             "above 0), on the held-out tasks all runs share.", "", *rows, ""]
    lines += [f"- {name}: headroom undefined: {why}" for name, why in s["undefined"].items()]
    if "difference" in s:
        d = s["difference"]
        lines += [f"Staged minus same-stage headroom (paired over {len(d['per_task'])} tasks): "
                  f"{_pts(d['mean'], d['ci'])} Pass@1 points. Criterion (c) pools this over the seeds "
                  "(python -m chorus.analyze study=...).", ""]
    if "families_opd" in s:
        v = s["families_opd"]
        rec = v["recovery"]
        lines += [f"Positive control: OPD over the family experts ({s['sets']['families_opd']}) minus the best of them: "
                  f"{_pts(v['delta'], v['delta_ci'])} Pass@1 points"
                  + (f"; gap recovery between {100 * rec[0]:.0f} % and {100 * rec[1]:.0f} %" if not np.isnan(rec[0])
                     else "") + ".", ""]
    return "\n".join(lines)


def verdict_markdown(v: dict, summaries: list[dict]) -> str:
    """The pre-registered verdict as docs/results.md states it, with every number it rests on."""
    yes = {True: "holds", False: "fails"}
    lines = ["| seed dir | staged experts' Pass@1 spread (points) | staged headroom [lower bound] | "
             "same-stage headroom | staged - same-stage |", "|---|---|---|---|---|"]
    for s, spread, (h, lo) in zip(summaries, v["spreads"], v["headrooms"]):
        same = _pts(s["same_stage"]["headroom"], s["same_stage"]["ci"]) if "same_stage" in s else "-"
        diff = _pts(s["difference"]["mean"], s["difference"]["ci"]) if "difference" in s else "-"
        lines.append(f"| {s['runs_dir']} | {spread:.1f} | {h:+.1f} [{lo:+.1f}] | {same} | {diff} |")
    lines += ["", f"- (a) premise (every expert within {PREMISE_POINTS:g} Pass@1 points of the best, every seed): "
              f"{yes[v['a']]}",
              f"- (b) complementarity (headroom >= {MIN_HEADROOM:g} points and lower bound > 0, every seed): "
              f"{yes[v['b']]}",
              (f"- (c) staging matters (staged - same-stage headroom pooled over {v['seeds']} seeds: "
               f"{v['pooled_difference']:+.1f} [{v['pooled_ci'][0]:+.1f}, {v['pooled_ci'][1]:+.1f}], lower bound > 0): "
               if "missing_same_stage" not in v else
               f"- (c) staging matters: not measured (no same_stage set on seed {v['missing_same_stage']}): ")
              + yes[bool(v['c'])],
              f"- Claim \"the tiny world shows CHORUS's complementarity\": {'made' if v['claim'] else 'not made'} "
              f"(3 criteria over {v['seeds']} seeds, Pass@1 only)."]
    return "\n".join(lines)
