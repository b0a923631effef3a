"""Study v2's statistics, per seed and pooled over seeds (the rule is pre-registered in docs/results.md).

Per seed (one SFT chain, every stage x R RL seeds), on Pass@1 in points:
- stage means over their RL seeds, and the premise: each pair of stages within +-PREMISE_POINTS
  by TOST (a 90 % interval inside the margin). A pair's variance is the RL seeds' (pooled over the
  stages with >= 2 of them) over the replicates, plus the tasks' (the per-task difference's);
- the primary statistic (chorus.analysis.patterns): noise-corrected pattern dissimilarity across
  stages minus within stages, with its exact permutation p-value;
- secondary: the mean cross-fitted headroom of the staged triplets (one expert per stage); staged
  minus same-stage triplets' headroom, raw and adjusted for the triplets' level spread (least
  squares over all triplets); the positive control's headroom; consolidated models against the best
  of the experts they consolidate.
Pooled: every row by random effects (chorus.analysis.pooling, Hartung-Knapp), the primary's p by
independent splits per seed, Holm over the secondary claims (one-sided at 2.5 %: a claim alone is the
printed 95 % interval's lower bound above 0). The pooled pattern row's interval and the primary's p
answer different questions: the row's is for a population of SFT chains (random effects, wide with 3
seeds), the permutation test for "stage labels do not matter on these chains" (exact).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..core.stats import N_BOOT
from . import crossfit, patterns
from .matrix import task_matrix
from .pooling import equivalent, holm, p_one_sided, random_effects
from .study_manifest import STAGES, Manifest

PREMISE_POINTS = 5.0
N_SPLITS = 64  # cross-fitting splits per triplet (30 triplets a seed)
SECONDARY = ("staged_headroom", "staged_minus_same_adjusted", "positive_headroom")


@dataclass
class Row:
    """One seed's estimate of a quantity and its variance (for pooling) and interval."""
    estimate: float
    variance: float
    lo: float
    hi: float

    def as_dict(self) -> dict:
        return {"estimate": self.estimate, "lo": self.lo, "hi": self.hi}


def row(estimate: float, variance: float, z: float = 1.959964) -> Row:
    half = z * float(np.sqrt(variance))
    return Row(float(estimate), float(variance), float(estimate) - half, float(estimate) + half)


def mean_row(per_task: np.ndarray) -> Row:
    """A per-task mean (points) with its variance over tasks."""
    v = np.asarray(per_task, dtype=float)
    return row(v.mean(), v.var(ddof=1) / len(v))


def stage_major(m: Manifest, labels: dict) -> tuple[list[str], list[str]]:
    """The manifest's experts as table labels, stage by stage in replicate order, and each one's stage."""
    pairs = [(labels[str(d)], s) for s in STAGES for d in m.experts[s]]
    return [e for e, _ in pairs], [s for _, s in pairs]


def seed_rows(table: pd.DataFrame, m: Manifest, labels: dict, seed: int = 0, n_boot: int = N_BOOT) -> dict:
    """Every row of one seed. table: the aligned per-sample table of the manifest's runs; labels:
    run dir (str) -> its label in the table."""
    names = {s: [labels[str(d)] for d in ds] for s, ds in m.experts.items()}
    experts, stage_of = stage_major(m, labels)
    rates = patterns.Rates.from_table(table, experts)
    P = 100 * rates.p  # tasks x experts, points
    out: dict = {"rows": {}, "tests": {}, "notes": [], "n_tasks": len(rates.tasks),
                 "experts": {s: dict(zip(names[s], map(float, P[:, [experts.index(e) for e in names[s]]].mean(0))))
                             for s in STAGES}}
    rows = out["rows"]
    by_stage = {s: P[:, [i for i, x in enumerate(stage_of) if x == s]] for s in STAGES}
    for s in STAGES:
        rows[f"stage_mean/{s}"] = mean_row(by_stage[s].mean(axis=1))
    rl_var = pooled_rl_variance(by_stage)
    if np.isnan(rl_var):
        out["notes"].append("no stage has two RL seeds: the premise's variance holds the tasks' only")
    for a, b in itertools.combinations(STAGES, 2):
        d = by_stage[a].mean(axis=1) - by_stage[b].mean(axis=1)
        extra = 0.0 if np.isnan(rl_var) else rl_var * (1 / by_stage[a].shape[1] + 1 / by_stage[b].shape[1])
        rows[f"premise/{a}-{b}"] = row(d.mean(), d.var(ddof=1) / len(d) + extra, z=1.644854)  # 90 %: TOST
    if len(set(stage_of)) < len(stage_of):
        sp = patterns.seed_patterns(rates, stage_of)
        var_s, var_share = patterns.bootstrap_variance(rates, stage_of, n_boot, seed)
        rows["pattern_difference"], rows["pattern_stage_share"] = row(sp.statistic, var_s), row(sp.share, var_share)
        out["tests"]["pattern_p"], out["patterns"] = sp.p, sp
    triplets(table, experts, stage_of, rows, out, seed)
    if m.families:
        fam = [labels[str(d)] for d in m.families]
        h = triplet_headroom(crossfit.cells(table, fam), [list(range(len(fam)))], np.random.default_rng(seed))
        rows["positive_headroom"] = mean_row(h[:, 0])
        if m.families_opd:
            rows["positive_opd_vs_best"] = versus_best(table, labels[str(m.families_opd)], fam)
    heads = [names[s][0] for s in STAGES]
    for method, d in m.consolidations.items():
        rows[f"staged_{method}_vs_best"] = versus_best(table, labels[str(d)], heads)
    opd = {"families": ("positive", m.families_opd), "staged": ("staged", m.consolidations.get("opd"))}
    for key, control in m.opd_controls.items():  # OPD minus each of its controls, paired
        part, kind = key.split("/", 1)
        prefix, ours = opd[part]
        if ours is not None:
            d = paired(table, labels[str(ours)], labels[str(control)])
            rows[f"{prefix}_opd_vs_{'self' if kind == 'own_teacher' else kind}"] = mean_row(d[:, 0] - d[:, 1])
    if {"opd", "soup"} <= set(m.consolidations):
        d = paired(table, labels[str(m.consolidations["opd"])], labels[str(m.consolidations["soup"])])
        rows["staged_opd_vs_soup"] = mean_row(d[:, 0] - d[:, 1])
    if m.agentic:  # the secondary protocol: each stage's first expert with feedback turns, no claim
        agentic = [labels[str(m.agentic[s])] for s in STAGES if s in m.agentic]
        for s in STAGES:
            if s in m.agentic:
                gain = paired(table, labels[str(m.agentic[s])], names[s][0])
                rows[f"agentic/stage_mean/{s}"] = mean_row(gain[:, 0])
                rows[f"agentic/gain/{s}"] = mean_row(gain[:, 0] - gain[:, 1])
        if len(agentic) == len(STAGES):
            h = triplet_headroom(crossfit.cells(table, agentic), [list(range(len(agentic)))],
                                 np.random.default_rng(seed + 11))
            rows["agentic/staged_headroom"] = mean_row(h[:, 0])
    return out


def pass_rates(table: pd.DataFrame, runs: list[str]) -> pd.DataFrame:
    """tasks x runs: each run's pass rate per task, on the tasks all of them have."""
    return task_matrix(table[table["run"].isin(runs)]).dropna()


def paired(table: pd.DataFrame, a: str, b: str) -> np.ndarray:
    """tasks x 2: the Pass@1 (points) of runs a and b on the tasks both have."""
    return 100 * pass_rates(table, [a, b])[[a, b]].to_numpy(float)


def pooled_rl_variance(by_stage: dict[str, np.ndarray]) -> float:
    """The RL seeds' variance of an expert's Pass@1 (points^2), pooled over stages with >= 2."""
    num = sum(float(np.var(x.mean(axis=0), ddof=1)) * (x.shape[1] - 1) for x in by_stage.values() if x.shape[1] > 1)
    df = sum(x.shape[1] - 1 for x in by_stage.values())
    return num / df if df else float("nan")


def triplet_headroom(c: crossfit.Cells, groups: list[list[int]], rng) -> np.ndarray:
    """tasks x groups: each group's cross-fitted oracle minus its best expert (by mean), points."""
    single = crossfit.singles(c, None)["pass_at_1"]
    out = []
    for g in groups:
        sub = crossfit.Cells(c.tasks, [c.runs[i] for i in g], c.passed[:, g], c.coverage[:, g], c.counts[:, g])
        oracle = crossfit.cross_fit(sub, None, N_SPLITS, rng)["pass_at_1"]
        best = g[int(np.argmax(single[:, g].mean(axis=0)))]
        out.append(oracle - single[:, best])
    return 100 * np.array(out).T


def triplets(table, experts, stage_of, rows, out, seed) -> None:
    """Staged triplets (one expert per stage) against same-stage triplets (three of one stage)."""
    idx = {s: [i for i, x in enumerate(stage_of) if x == s] for s in STAGES}
    staged = [list(t) for t in itertools.product(*idx.values())]
    same = [list(t) for s in STAGES for t in itertools.combinations(idx[s], 3)]
    c = crossfit.cells(table, experts)
    h = triplet_headroom(c, staged + same, np.random.default_rng(seed))
    rows["staged_headroom"] = mean_row(h[:, :len(staged)].mean(axis=1))
    if not same:
        out["notes"].append("no stage has three RL seeds: no same-stage triplet")
        return
    rows["staged_minus_same_headroom"] = mean_row(h[:, :len(staged)].mean(axis=1) - h[:, len(staged):].mean(axis=1))
    rates = 100 * crossfit.singles(c, None)["pass_at_1"]
    is_staged = np.r_[np.ones(len(staged)), np.zeros(len(same))]
    groups = staged + same
    fit = lambda w: adjusted_difference(w @ h / w.sum(), w @ rates / w.sum(), groups, is_staged)
    est = fit(np.ones(len(h)))
    rng = np.random.default_rng(seed + 7)
    boots = [fit(np.bincount(rng.integers(0, len(h), len(h)), minlength=len(h)).astype(float)) for _ in range(500)]
    rows["staged_minus_same_adjusted"] = row(est, float(np.var(boots, ddof=1)))


def adjusted_difference(head: np.ndarray, means: np.ndarray, groups, is_staged) -> float:
    """The staged indicator's coefficient in headroom ~ 1 + staged + level spread, over triplets."""
    spread = np.array([means[g].max() - means[g].min() for g in groups])
    X = np.c_[np.ones(len(groups)), is_staged, spread]
    return float(np.linalg.lstsq(X, head, rcond=None)[0][1])


def versus_best(table: pd.DataFrame, model: str, experts: list[str]) -> Row:
    """A consolidated model's Pass@1 minus the best (by mean) of `experts`, paired over tasks."""
    m = pass_rates(table, [model, *experts])
    best = max(experts, key=lambda e: m[e].mean())
    return mean_row(100 * (m[model] - m[best]).to_numpy())


def pool(seeds: list[dict], alpha: float = 0.05, seed: int = 0) -> dict:
    """Every row pooled over the seeds that have it; the primary's pooled p; Holm; the verdict."""
    rows = {}
    for name in dict.fromkeys(k for s in seeds for k in s["rows"]):
        have = [s["rows"][name] for s in seeds if name in s["rows"]]
        a = 0.10 if name.startswith("premise/") else alpha
        p = random_effects([r.estimate for r in have], [r.variance for r in have], alpha=a)
        rows[name] = {**p.row(), "tau2": p.tau2, "i2": p.i2, "q": p.q, "seeds": p.k}
    tests: dict = {}
    if all("patterns" in s for s in seeds):
        tests["pattern_p"] = patterns.pooled_p([s["patterns"] for s in seeds], seed)
    ps = {h: p_one_sided(random_effects([s["rows"][h].estimate for s in seeds],
                                        [s["rows"][h].variance for s in seeds], alpha), alpha)
          for h in SECONDARY if all(h in s["rows"] for s in seeds)}
    # one-sided at alpha / 2: alone, a claim is exactly the printed (1 - alpha) interval's lower bound > 0
    tests["secondary_p"], tests["holm"], tests["holm_alpha"] = ps, holm(ps, alpha / 2), alpha / 2
    premise = [rows[f"premise/{a}-{b}"] for a, b in itertools.combinations(STAGES, 2)]
    v = {"premise": all(equivalent(r["lo"], r["hi"], PREMISE_POINTS) for r in premise),
         "primary": bool(tests.get("pattern_p", 1.0) <= alpha),
         "staged_complementary": bool(tests["holm"].get("staged_headroom", False))}
    v["claim"] = v["premise"] and v["primary"] and v["staged_complementary"]
    if all("positive_opd_vs_best" in s["rows"] for s in seeds) and "positive_opd_vs_self" in rows:
        # issue 40's bar: OPD beats the best family expert (lower bound > 0) on at least 2 of 3 seeds
        # and pooled, and its own-teacher control pooled
        ahead = sum(s["rows"]["positive_opd_vs_best"].lo > 0 for s in seeds)
        v["opd_consolidates"] = bool(ahead >= min(2, len(seeds)) and rows["positive_opd_vs_best"]["lo"] > 0
                                     and rows["positive_opd_vs_self"]["lo"] > 0)
    return {"rows": rows, "tests": tests, "verdict": v}
