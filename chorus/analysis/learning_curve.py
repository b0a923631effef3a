"""An RL run's learning curve on its held-out split, and the RL length a study fixes from it.

A run made with rl.eval_every=N evaluates its policy every N steps into eval/step_<n>/ and at the end
into the run dir itself (each a per-task table and summary.json). The curve is Pass@1 per evaluated
step with a bootstrap interval over tasks. The length rule (issue 39: fixed on validation, before the
study runs): the earliest evaluated step whose Pass@1 is not worse than the best step's, paired over
tasks (the 95 % interval of best minus it contains 0), so more steps are bought only where they
measurably help.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.stats import N_BOOT
from ..tracking.run_dir import SUMMARY, read_table
from .bootstrap import bootstrap_mean_ci

STEP_DIR = re.compile(r"step_(\d+)")


def evaluations(run_dir: str | Path) -> dict[int, Path]:
    """step -> the dir of its evaluation: eval/step_<n>/ and, at the run's last step, the run dir."""
    run = Path(run_dir)
    try:
        summary = json.loads((run / SUMMARY).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"curve={run}: {SUMMARY}: {str(exc).splitlines()[0]}; give an RL run dir") from None
    if summary.get("job") != "rl":
        raise ValueError(f"curve={run}: not an RL run (job {summary.get('job')!r})")
    found = {int(m.group(1)): d for d in (run / "eval").glob("step_*") if (m := STEP_DIR.fullmatch(d.name))
             and (d / SUMMARY).exists()}
    found[int(summary.get("steps") or max(found, default=0) + 1)] = run
    if len(found) < 2:
        raise ValueError(f"curve={run}: one evaluation only; train with rl.eval_every=N for a curve")
    return dict(sorted(found.items()))


def per_task(run_dir: str | Path) -> pd.DataFrame:
    """tasks x steps: each task's pass rate at each evaluated step (the tasks every step has)."""
    cols = {}
    for step, d in evaluations(run_dir).items():
        t = read_table(d)
        cols[step] = t.groupby("task_id")["passed"].mean()
    return pd.DataFrame(cols).dropna()


def curve(run_dir: str | Path, n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """Pass@1 (points) per step with its interval, the best step, and the chosen length."""
    m = 100 * per_task(run_dir)
    best = int(m.mean().idxmax())
    rows = []
    for step in m.columns:
        lo, hi = bootstrap_mean_ci(m[step].to_numpy(), n_boot, seed=seed)
        d_lo, d_hi = bootstrap_mean_ci((m[best] - m[step]).to_numpy(), n_boot, seed=seed)
        rows.append({"step": int(step), "pass_at_1": float(m[step].mean()), "lo": lo, "hi": hi,
                     "behind_best": float((m[best] - m[step]).mean()), "behind_lo": d_lo, "behind_hi": d_hi})
    chosen = next(r["step"] for r in rows if r["behind_lo"] <= 0)
    return {"tasks": len(m), "rows": rows, "best": best, "chosen": chosen}


def markdown(c: dict) -> str:
    lines = [f"Learning curve over {c['tasks']} held-out tasks (Pass@1 points, 95 % bootstrap over tasks):", "",
             "| step | Pass@1 | behind the best step, paired |", "|---|---|---|"]
    for r in c["rows"]:
        lines.append(f"| {r['step']} | {r['pass_at_1']:.1f} [{r['lo']:.1f}, {r['hi']:.1f}] | "
                     f"{r['behind_best']:+.1f} [{r['behind_lo']:+.1f}, {r['behind_hi']:+.1f}] |")
    lines += ["", f"best step {c['best']}; chosen length (earliest step not worse than the best): {c['chosen']}"]
    return "\n".join(lines)


def plot(c: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in c["rows"]]
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.errorbar(steps, [r["pass_at_1"] for r in c["rows"]],
                yerr=np.array([[r["pass_at_1"] - r["lo"] for r in c["rows"]], [r["hi"] - r["pass_at_1"] for r in c["rows"]]]),
                marker="o", capsize=3)
    ax.axvline(c["chosen"], ls="--", c="gray")
    ax.set_xlabel("RL step")
    ax.set_ylabel("held-out Pass@1 (%)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
