"""The study's primary statistic: do experts of different SFT stages solve different tasks more than
experts of one stage (different RL seeds) do, whatever their levels?

Per task t and expert e, p_e(t) is the pass rate over its n samples. An expert's pattern is p_e
minus its own mean over tasks (its level), so two experts that differ by a constant are alike. The
dissimilarity of experts i and j is the mean over tasks of (c_i - c_j)^2 with the sampling noise
taken out: E[(p_hat - p)^2] = p (1 - p) / n, estimated without bias by p_hat (1 - p_hat) / (n - 1),
and centring keeps (1 - 1/T) of it. So D_ij estimates the true patterns' distance without bias.

The statistic is S = mean D over pairs from different stages minus mean D over pairs from the
same stage (in points^2: rates x 100). If stages add a pattern of variance s_u^2 to RL seeds' own
s_w^2, cross-stage pairs sit at 2 (s_u^2 + s_w^2) and same-stage pairs at 2 s_w^2: S = 2 s_u^2, and
S / D_cross is the stage's share of the expert-specific variance.

The test is exact: under "stage labels do not matter", the experts of one seed are exchangeable, so
every way of splitting them into groups of the design's sizes is equally likely; p is the share of
those splits (the observed one among them) with S at least the observed. Over seeds the statistic is
the mean of the seeds' S, each seed split independently (sampled when there are too many products).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..core.stats import N_BOOT

MAX_EXACT = 200_000  # pooled splits enumerated exactly up to this many, else sampled
N_DRAWS = 100_000  # sampled pooled splits


@dataclass
class Rates:
    """Per task x expert pass rates and sample counts, expert order as given."""
    tasks: list
    experts: list
    p: np.ndarray  # tasks x experts, 0-1
    n: np.ndarray  # tasks x experts

    @classmethod
    def from_table(cls, table: pd.DataFrame, experts: list[str]) -> "Rates":
        t = table[table["run"].isin(experts)]
        g = t.groupby(["task_id", "run"])["passed"]
        k = g.sum().unstack("run").reindex(columns=experts)
        n = g.size().unstack("run").reindex(columns=experts)
        keep = n.notna().all(axis=1)  # tasks every expert was evaluated on
        if not keep.any():
            raise ValueError(f"experts {experts} share no held-out task")
        n = n[keep].to_numpy(float)
        if (n < 2).any():
            raise ValueError(f"the noise-corrected pattern needs >= 2 samples per task and expert (fewest here: "
                             f"{int(n.min())})")
        return cls(list(k.index[keep]), list(experts), k[keep].to_numpy(float) / n, n)


def dissimilarity(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    """experts x experts: noise-corrected mean squared distance of the centred patterns, points^2."""
    T = p.shape[0]
    c = p - p.mean(axis=0, keepdims=True)
    noise = (1 - 1 / T) * (p * (1 - p) / (n - 1)).mean(axis=0)
    diff = c[:, :, None] - c[:, None, :]
    d = (diff ** 2).mean(axis=0) - noise[:, None] - noise[None, :]
    np.fill_diagonal(d, 0.0)
    return 1e4 * d


def contrast(d: np.ndarray, labels) -> float:
    """Mean D over pairs of different labels minus mean D over pairs of one label."""
    lab = np.asarray(labels)
    iu = np.triu_indices(len(lab), 1)
    same = lab[iu[0]] == lab[iu[1]]
    if same.all() or not same.any():
        raise ValueError("the pattern contrast needs pairs within a stage and pairs across stages")
    vals = d[iu]
    return float(vals[~same].mean() - vals[same].mean())


def cross_mean(d: np.ndarray, labels) -> float:
    lab = np.asarray(labels)
    iu = np.triu_indices(len(lab), 1)
    return float(d[iu][lab[iu[0]] != lab[iu[1]]].mean())


def splits(labels) -> list[tuple]:
    """Every distinct way to split the experts into unlabelled groups of the labels' group sizes,
    each as a tuple of group ids per expert (canonical: groups numbered by first appearance)."""
    lab = list(labels)
    sizes = sorted(pd.Series(lab).value_counts().tolist(), reverse=True)
    if math.factorial(len(lab)) // math.prod(math.factorial(s) for s in sizes) > 2_000_000:
        raise ValueError(f"{len(lab)} experts give too many splits to enumerate")
    # set partitions grown expert by expert (each expert joins an open group or opens the next one,
    # so every split comes once, numbered by first appearance), kept when the group sizes match:
    # not the n! orderings of the labels, which 12 experts (3 stages x 4 RL seeds) made minutes
    out, target, split, counts = [], sorted(sizes), [], []

    def grow():
        if len(split) == len(lab):
            if sorted(counts) == target:
                out.append(tuple(split))
            return
        for g in range(len(counts) + (len(counts) < len(sizes))):
            if g == len(counts):
                counts.append(0)
            if counts[g] < sizes[0]:
                counts[g] += 1
                split.append(g)
                grow()
                split.pop()
                counts[g] -= 1
            if counts[g] == 0:
                counts.pop()
    grow()
    return sorted(out)


@dataclass
class SeedPatterns:
    statistic: float  # S, points^2
    share: float  # S / D_cross
    p: float  # exact permutation p-value (one-sided: S this large)
    null: np.ndarray  # S over every split
    d: np.ndarray  # the dissimilarity matrix
    n_tasks: int


def seed_patterns(rates: Rates, labels) -> SeedPatterns:
    """One seed's S, its share and its exact permutation p-value."""
    d = dissimilarity(rates.p, rates.n)
    s = contrast(d, labels)
    null = np.array([contrast(d, g) for g in splits(labels)])
    p = float((null >= s - 1e-12).mean())
    return SeedPatterns(s, s / cross_mean(d, labels), p, null, d, len(rates.tasks))


def pooled_p(seeds: list[SeedPatterns], seed: int = 0) -> float:
    """The p-value of the mean of the seeds' S, the seeds split independently: exact when the
    product of the seeds' split counts is at most MAX_EXACT, else from N_DRAWS sampled splits (with
    the observed one counted, so p >= 1 / (N_DRAWS + 1))."""
    observed = np.mean([s.statistic for s in seeds])
    nulls = [s.null for s in seeds]
    if math.prod(len(x) for x in nulls) <= MAX_EXACT:
        total = np.zeros(1)
        for x in nulls:
            total = (total[:, None] + x[None, :]).ravel()
        return float((total / len(nulls) >= observed - 1e-12).mean())
    rng = np.random.default_rng(seed)
    draws = np.mean([x[rng.integers(0, len(x), N_DRAWS)] for x in nulls], axis=0)
    return float((1 + (draws >= observed - 1e-12).sum()) / (N_DRAWS + 1))


def bootstrap_variance(rates: Rates, labels, n_boot: int = N_BOOT, seed: int = 0) -> tuple[float, float]:
    """Variance of S and of the share over task resamples (the tasks are a sample of designs)."""
    rng = np.random.default_rng(seed)
    T = len(rates.tasks)
    s, share = [], []
    for _ in range(n_boot):
        i = rng.integers(0, T, T)
        d = dissimilarity(rates.p[i], rates.n[i])
        v = contrast(d, labels)
        s.append(v)
        share.append(v / cross_mean(d, labels))
    return float(np.var(s, ddof=1)), float(np.var(share, ddof=1))
