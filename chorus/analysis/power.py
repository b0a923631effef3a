"""How large an oracle headroom the claim rule can see in a given design, by simulation.

A design is a number of tasks, samples per task and each expert's Pass@1. Experts are simulated in
the two-level model that the calibration fixtures use: an expert solves a set of tasks, passing each
sample there with probability `hi` and elsewhere with `lo`; the best expert's set is fixed by its
level, and the other experts put just enough of their solved tasks outside it to give the wanted
true headroom (the oracle's expected Pass@1 minus the best expert's). Each simulated data set gets
the same claim rule as a real run (oracle.headroom_claim: the cross-fitted headroom's bootstrap lower
bound above 0); the power at a headroom is the share of data sets where the claim is made, and the
minimum detectable headroom (MDE) the smallest headroom on the grid with power >= the target.

The two-level model is an assumption: real experts have intermediate per-task rates, whose extra
noise raises the MDE. `design_from_runs` also estimates hi and lo from a run's experts (the mean
per-task rate of the tasks each solves, of those it does not), so the model matches the run's spread
as far as two levels can.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .oracle import headroom_claim

POWER = 0.8
GRID_STEP = 0.5  # points of Pass@1 between the headrooms tried
POWER_SIMS = 100  # simulated data sets per headroom tried (a power of 0.8 is known to about +-0.08)
# The claim's bootstrap in each simulated data set: fewer than an analysis's (core.stats.N_BOOT), as it runs
# POWER_SIMS times per headroom tried; the minimum detectable headrooms the docs quote were found with it
SIM_BOOT = 500


@dataclass(frozen=True)
class Design:
    n_tasks: int
    samples: int
    levels: tuple[float, ...]  # each expert's Pass@1, 0-1
    hi: float = 0.9  # an expert's pass rate on a task it solves
    lo: float = 0.03  # and on one it does not

    def check(self) -> None:
        if self.n_tasks < 2 or self.samples < 2:
            raise ValueError(f"a design needs >= 2 tasks and >= 2 samples per task (the cross-fitted oracle "
                             f"chooses on one half and scores on the other); got {self.n_tasks} x {self.samples}")
        if len(self.levels) < 2:
            raise ValueError("a design needs >= 2 experts (levels=[...])")
        if not 0 <= self.lo < self.hi <= 1:
            raise ValueError(f"need 0 <= lo < hi <= 1; got lo={self.lo}, hi={self.hi}")
        bad = [lv for lv in self.levels if not self.lo <= lv <= self.hi]
        if bad:
            raise ValueError(f"expert levels {bad} lie outside [lo, hi] = [{self.lo}, {self.hi}]: the two-level "
                             "model cannot produce them; give hi/lo that bracket every level")


def solved_counts(design: Design) -> list[int]:
    return [int(round((lv - design.lo) / (design.hi - design.lo) * design.n_tasks)) for lv in design.levels]


def max_headroom(design: Design) -> float:
    """The largest true headroom the model can give these levels (every other expert's tasks outside
    the best one's set, as far as there are tasks)."""
    s = solved_counts(design)
    b = int(np.argmax(s))
    extra = min(sum(s) - s[b], design.n_tasks - s[b])
    return (design.hi - design.lo) * extra / design.n_tasks


def pass_rates(design: Design, headroom: float, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """tasks x experts true pass rates giving the levels and (as near as whole tasks allow) the
    headroom; returns them and the headroom they really have."""
    design.check()
    s = solved_counts(design)
    b = int(np.argmax(s))
    m = int(round(headroom / (design.hi - design.lo) * design.n_tasks))
    if headroom < 0 or m > min(sum(s) - s[b], design.n_tasks - s[b]):
        raise ValueError(f"a true headroom of {100 * headroom:.1f} points is out of reach for levels "
                         f"{list(design.levels)} on {design.n_tasks} tasks (at most {100 * max_headroom(design):.1f})")
    order = rng.permutation(design.n_tasks)
    best_set, outside = order[: s[b]], order[s[b]:]
    others = [e for e in range(len(s)) if e != b]
    # the m tasks outside the best set are shared out in proportion to the others' set sizes
    share = np.array([s[e] for e in others], dtype=float)
    private = np.minimum(np.floor(m * share / max(share.sum(), 1)).astype(int), share.astype(int))
    for i in np.argsort(-share):
        if private.sum() >= m:
            break
        private[i] += min(m - private.sum(), int(share[i]) - private[i])
    rates = np.full((design.n_tasks, len(s)), design.lo)
    rates[best_set, b] = design.hi
    start = 0
    for e, x in zip(others, private):
        mine = list(outside[start:start + x])
        start += x
        inside = rng.choice(best_set, size=min(s[e] - x, len(best_set)), replace=False) if s[e] > x else []
        rates[np.r_[mine, inside].astype(int), e] = design.hi
    true = float(rates.max(axis=1).mean() - rates.mean(axis=0).max())
    return rates, true


def sample_table(rates: np.ndarray, samples: int, rng: np.random.Generator) -> pd.DataFrame:
    """Run records (run, task_id, passed, coverage) drawn from per-task pass rates: coverage 96 for a
    pass and 40 for a fail, so coverage says nothing the pass does not."""
    T, R = rates.shape
    passed = rng.random((T, R, samples)) < rates[:, :, None]
    t, r, _ = np.meshgrid(np.arange(T), np.arange(R), np.arange(samples), indexing="ij")
    return pd.DataFrame({"run": [f"e{i}" for i in r.ravel()], "task_id": [f"t{i:04d}" for i in t.ravel()],
                         "passed": passed.ravel(), "coverage": np.where(passed.ravel(), 96.0, 40.0)})


def claim_rate(design: Design, headroom: float, n_sims: int = POWER_SIMS, seed: int = 0, alpha: float = 0.05,
               n_boot: int = SIM_BOOT, n_splits: int = 32) -> dict:
    """Share of simulated data sets on which the claim is made, with its Wilson 95 % interval."""
    rng = np.random.default_rng(seed)
    runs = [f"e{i}" for i in range(len(design.levels))]
    hits, trues = 0, []
    for i in range(n_sims):
        rates, true = pass_rates(design, headroom, rng)
        trues.append(true)
        c = headroom_claim(sample_table(rates, design.samples, rng), runs, "pass_at_1", n_boot=n_boot, alpha=alpha,
                           n_splits=n_splits, seed=int(rng.integers(2**31)))
        hits += bool(c["claimed"])
    return {"headroom": headroom, "true_headroom": float(np.mean(trues)), "power": hits / n_sims,
            "power_ci": wilson(hits, n_sims), "n_sims": n_sims}


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return float("nan"), float("nan")
    p = k / n
    mid, half = (p + z * z / (2 * n)), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (mid - half) / (1 + z * z / n), (mid + half) / (1 + z * z / n)


def minimum_detectable_headroom(design: Design, power: float = POWER, n_sims: int = POWER_SIMS, seed: int = 0,
                                alpha: float = 0.05, step: float = GRID_STEP / 100, **kw) -> dict:
    """The smallest headroom on a grid of `step` (0-1 scale) whose simulated power is >= `power`,
    found by bisection (power grows with the headroom); NaN when even the largest reachable
    headroom falls short. Returns mde, the curve of every headroom tried, and the design."""
    top = max_headroom(design)
    grid = np.arange(step, top + 1e-12, step)
    mde, curve = smallest_powered([float(h) for h in grid], lambda i, h: claim_rate(design, h, n_sims, seed + i, alpha, **kw),
                                  power)
    return {"mde": mde, "curve": curve, "design": design, "power": power}


def smallest_powered(grid: list[float], measure, power: float) -> tuple[float, list[dict]]:
    """The smallest grid value whose measured power is >= `power`, by bisection (power grows along the
    grid), NaN when even the last falls short; and the measurement (measure(i, value): a dict with
    "power") of every value tried, in grid order. Each value is measured at most once."""
    tried: dict[int, dict] = {}

    def at(i: int) -> dict:
        if i not in tried:
            tried[i] = measure(i, grid[i])
        return tried[i]
    lo, hi = 0, len(grid) - 1
    if not grid or at(hi)["power"] < power:
        return float("nan"), [tried[i] for i in sorted(tried)]
    while lo < hi:
        mid = (lo + hi) // 2
        if at(mid)["power"] >= power:
            hi = mid
        else:
            lo = mid + 1
    return float(grid[lo]), [tried[i] for i in sorted(tried)]


def design_from_runs(table: pd.DataFrame, runs: list[str], min_rate: float = 0.5) -> Design:
    """The design of real runs (the tidy per-sample table): their common tasks, fewest samples per
    (task, run), each run's Pass@1, and the two-level rates: hi = the mean per-task rate over the
    (task, run) cells a run solves (rate >= min_rate), lo = over those it does not, widened where
    needed so that every level lies in [lo, hi]."""
    t = table[table["run"].isin(runs)]
    rates = t.groupby(["task_id", "run"])["passed"].mean().unstack()
    missing = [r for r in runs if r not in rates.columns]
    if missing:
        raise ValueError(f"runs {missing} have no samples in the table")
    vals = rates[runs].dropna().to_numpy()
    counts = t.groupby(["task_id", "run"]).size()
    solved = vals >= min_rate
    hi = float(vals[solved].mean()) if solved.any() else 0.9
    lo = float(vals[~solved].mean()) if (~solved).any() else 0.03
    levels = tuple(float(x) for x in vals.mean(axis=0))
    d = Design(n_tasks=len(vals), samples=int(counts.min()), levels=levels, hi=max(hi, *levels),
               lo=min(lo, *levels))
    d.check()
    return d


def resolve_design(given: dict, table: pd.DataFrame | None = None, runs: list[str] | None = None) -> Design:
    """A design from settings (tasks, samples, levels, hi, lo; None = unset), the unset ones read
    from real runs where a table and runs are given, else the defaults (hi, lo) or an error."""
    pick = {k: given.get(k) for k in ("tasks", "samples", "levels", "hi", "lo")}
    if table is not None and runs:
        base = design_from_runs(table, runs)
        read = {"tasks": base.n_tasks, "samples": base.samples, "levels": base.levels, "hi": base.hi, "lo": base.lo}
        pick = {k: read[k] if v is None else v for k, v in pick.items()}
    missing = [k for k in ("tasks", "samples", "levels") if pick[k] is None]
    if missing:
        raise ValueError(f"the design needs {', '.join('design.' + m for m in missing)}, or runs= to read them from")
    d = Design(int(pick["tasks"]), int(pick["samples"]), tuple(float(x) for x in pick["levels"]),
               **{k: float(pick[k]) for k in ("hi", "lo") if pick[k] is not None})
    d.check()
    return d


def power_report(result: dict) -> str:
    """The MDE and the power curve as printed lines."""
    d = result["design"]
    head = (f"design: {d.n_tasks} tasks x {d.samples} samples, expert Pass@1 "
            f"{', '.join(f'{100 * x:.1f}' for x in d.levels)} %, two-level rates hi {d.hi:.2f} / lo {d.lo:.2f}")
    rows = [f"  headroom {100 * c['headroom']:5.1f} points: power {c['power']:.2f} "
            f"[{c['power_ci'][0]:.2f}, {c['power_ci'][1]:.2f}] over {c['n_sims']} simulated data sets"
            for c in result["curve"]]
    mde = result["mde"]
    last = (f"minimum_detectable_headroom={100 * mde:.1f} points at power {result['power']:g}" if mde == mde else
            f"minimum_detectable_headroom=none: even {100 * max_headroom(d):.1f} points (the most these levels "
            f"allow) is detected with power below {result['power']:g}")
    return "\n".join([head, *rows, last])
