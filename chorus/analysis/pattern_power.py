"""How large a stage effect the primary test (chorus.analysis.patterns) can see, by simulation.

A crossed study: `seeds` SFT chains, each with `stages` x `rl_seeds` experts. Expert e of seed k
passes a sample of task t with probability sigmoid(mu + a_t + c_k + u_{k,s(e)}(t) + w_e(t)):
a_t the task's difficulty (sd task_sd, shared by every expert: the held-out tasks are the same),
c_k the seed's level shift (sd seed_sd: seeds disagree), u the stage's own pattern (sd stage_sd,
drawn afresh per seed: a stage effect need not repeat across SFT chains), w the RL seed's own
pattern (sd rl_sd). mu is set so that the mean pass rate is `level`. The stage's share of the
expert-specific variance is stage_sd^2 / (stage_sd^2 + rl_sd^2) (v1's re-analysis: about 0.22 for
the stage, 0.66 for the RL seed, on a different scale). Power at a share is the fraction of
simulated studies whose pooled permutation p is <= alpha; the minimum detectable share is the
smallest share on the grid with power >= the target.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import patterns
from .power import smallest_powered, wilson

SHARES = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.8)


@dataclass(frozen=True)
class PatternDesign:
    tasks: int
    samples: int
    level: float = 0.25  # mean pass rate over experts and tasks
    seeds: int = 3
    stages: int = 3
    rl_seeds: int = 3
    # logit sds matched to v1 (analysis/studies/staged): its stage-2 RL siblings sit at D ~ 380 points^2
    # from each other, its task means spread with sd ~ 33 points
    task_sd: float = 4.0
    rl_sd: float = 1.5
    seed_sd: float = 0.2

    def check(self) -> None:
        if self.tasks < 2 or self.samples < 2:
            raise ValueError(f"the pattern test needs >= 2 tasks and >= 2 samples per task; got {self.tasks} x {self.samples}")
        if self.stages < 2 or self.rl_seeds < 2:
            raise ValueError("the pattern test needs >= 2 stages and >= 2 RL seeds per stage (pairs within and across)")
        if not 0 < self.level < 1 or self.seeds < 1 or min(self.task_sd, self.rl_sd, self.seed_sd) < 0:
            raise ValueError("need 0 < level < 1, seeds >= 1 and non-negative sds")


def intercept(level: float, task_sd: float) -> float:
    """mu with E[sigmoid(mu + a)] = level for a ~ N(0, task_sd^2) (Gauss-Hermite, bisection)."""
    x, w = np.polynomial.hermite_e.hermegauss(40)
    w = w / w.sum()
    lo, hi = -30.0, 30.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if (w / (1 + np.exp(-(mid + task_sd * x)))).sum() < level:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def simulate(d: PatternDesign, stage_sd: float, rng: np.random.Generator) -> list[patterns.Rates]:
    """One simulated study: per seed, the experts' pass rates over the tasks (stage-major order)."""
    mu = intercept(d.level, d.task_sd)
    a = rng.normal(0, d.task_sd, d.tasks)
    E = d.stages * d.rl_seeds
    out = []
    for _ in range(d.seeds):
        u = rng.normal(0, stage_sd, (d.tasks, d.stages)).repeat(d.rl_seeds, axis=1)
        logit = mu + a[:, None] + rng.normal(0, d.seed_sd) + u + rng.normal(0, d.rl_sd, (d.tasks, E))
        k = rng.binomial(d.samples, 1 / (1 + np.exp(-logit)))
        n = np.full(k.shape, float(d.samples))
        out.append(patterns.Rates(list(range(d.tasks)), list(range(E)), k / n, n))
    return out


def stage_sd_for(share: float, rl_sd: float) -> float:
    return rl_sd * math.sqrt(share / (1 - share))


def power_at(d: PatternDesign, share: float, sims: int = 200, seed: int = 0, alpha: float = 0.05) -> dict:
    d.check()
    rng = np.random.default_rng(seed)
    labels = [s for s in range(d.stages) for _ in range(d.rl_seeds)]
    hits = 0
    for _ in range(sims):
        seeds = [patterns.seed_patterns(r, labels) for r in simulate(d, stage_sd_for(share, d.rl_sd), rng)]
        hits += patterns.pooled_p(seeds, int(rng.integers(2**31))) <= alpha
    return {"share": share, "power": hits / sims, "power_ci": wilson(hits, sims), "sims": sims}


def minimum_detectable_share(d: PatternDesign, power: float = 0.8, sims: int = 200, seed: int = 0,
                             alpha: float = 0.05, shares=SHARES) -> dict:
    """The smallest share on the grid with simulated power >= `power` (bisection: power grows with
    the share), NaN when none; and every point tried."""
    mds, curve = smallest_powered(list(shares), lambda i, share: power_at(d, share, sims, seed + i, alpha), power)
    return {"mds": mds, "curve": curve, "design": d, "power": power}


def report(result: dict) -> str:
    d = result["design"]
    head = (f"pattern test design: {d.seeds} seeds x {d.stages} stages x {d.rl_seeds} RL seeds, {d.tasks} tasks x "
            f"{d.samples} samples, mean Pass@1 {100 * d.level:.0f} %, logit sds: task {d.task_sd:g}, RL seed "
            f"{d.rl_sd:g}, seed level {d.seed_sd:g}")
    rows = [f"  stage share {c['share']:.2f}: power {c['power']:.2f} [{c['power_ci'][0]:.2f}, {c['power_ci'][1]:.2f}] "
            f"over {c['sims']} simulated studies" for c in result["curve"]]
    m = result["mds"]
    last = (f"minimum_detectable_stage_share={m:.2f} at power {result['power']:g}" if m == m else
            f"minimum_detectable_stage_share=none: even {SHARES[-1]:.2f} is detected with power below {result['power']:g}")
    return "\n".join([head, *rows, last])
