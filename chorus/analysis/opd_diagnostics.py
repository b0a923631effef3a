"""What an OPD run did, step by step (steps.jsonl), and the validation curve its checkpoint was chosen
on (selection.jsonl): REPORT.md's OPD diagnostics. A run without these files has nothing to show."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

# steps.jsonl's columns, as REPORT.md names them (kl_<teacher> columns are added per teacher)
STEP_COLUMNS = {"step": "step", "routed_fraction": "routed", "samples_trained": "sequences trained",
                "routed_margin_mean": "margin (teacher - student)", "truncated_fraction": "truncated",
                "compile_rate": "compiles", "pass_rate": "student pass", "kd_kept": "teacher samples kept"}
# whole numbers: the table's rows are floats once a column has NaN
COUNTS = ("step", "sequences trained", "teacher samples kept")


def _lines(path: Path) -> pd.DataFrame:
    return pd.read_json(path, lines=True) if path.exists() and path.read_text().strip() else pd.DataFrame()


def opd_steps(run_dir: str | Path) -> pd.DataFrame:
    """Per step: the routed fraction of the step's tasks, the sequences trained, the routed tasks' mean
    teacher-student margin on the gate's metric, the mean per-token log-ratio of the student's samples
    to each routed teacher (kl_<teacher>: a sampled estimate of KL(student || teacher) on its routed
    tasks), the student's truncation and compile rates, and (opd.teacher_samples) the teachers' own
    samples kept as KD targets. Empty for a run that is not OPD."""
    d = _lines(Path(run_dir) / "steps.jsonl")
    if d.empty or "routed_fraction" not in d:
        return pd.DataFrame()
    kl = sorted(c for c in d if c.startswith("kl_"))
    cols = [c for c in STEP_COLUMNS if c in d] + kl
    return d[cols].rename(columns={**STEP_COLUMNS, **{c: f"KL to {c[3:]}" for c in kl}})


def selection_curve(run_dir: str | Path) -> pd.DataFrame:
    """The validation evaluations (step, pass_rate, ...) the run's checkpoint was chosen on, with the
    chosen one marked; empty without rl.select_every."""
    from ..rl.selection import best_point  # the rule the run chose by

    d = _lines(Path(run_dir) / "selection.jsonl")
    if d.empty:
        return d
    return d.assign(chosen=d["step"] == best_point(d.to_dict("records"))["step"])


def diagnostics_markdown(runs: dict[str, str | Path], plot: Path | None = None) -> list[str]:
    """REPORT.md lines for every run in `runs` (label -> dir) that has OPD steps or a validation curve;
    the curves drawn into `plot` when given."""
    lines, curves = [], {}
    for label, path in runs.items():
        steps, curve = opd_steps(path), selection_curve(path)
        if not steps.empty:
            formats = [".0f" if c in COUNTS else ".3f" for c in steps.columns]
            lines += [f"### {label}: per step", "", steps.to_markdown(index=False, floatfmt=formats), ""]
        if not curve.empty:
            curves[label] = curve
            chosen = int(curve.loc[curve["chosen"], "step"].iloc[0])
            lines += [f"{label}: validation Pass@1 by step (" + ", ".join(
                f"{int(r.step)}: {100 * r.pass_rate:.1f}" for r in curve.itertuples()) + f"); chosen: step {chosen}.", ""]
    if curves and plot is not None:
        from .plots import validation_curves

        validation_curves(curves, plot)
        lines += [f"![validation curves]({plot.name})", ""]
    if not lines:
        return []
    return ["## OPD diagnostics", "",
            "Per OPD step: the share of the step's tasks routed to a teacher, the sequences trained, the routed "
            "tasks' teacher-student margin on the gate's metric, the mean log-ratio of the student's sampled "
            "tokens to each routed teacher (a sampled KL(student || teacher)), and the student's truncation, "
            "compile and pass rates. Runs that choose their checkpoint on validation (rl.select_every) list "
            "that curve; the exported weights are the chosen step's.", "", *lines]
