"""Analyse a set of runs into a directory: the CHORUS table (markdown + csv) and the PNG plots."""
from __future__ import annotations

from pathlib import Path

from ..tracking.runs import RunSet
from . import plots
from .complementarity import jaccard_matrix, solved_sets, unique_solves
from .matrix import align_tasks, task_matrix
from .table import choose_experts, chorus_table, to_markdown

PLOTS = ("complementarity.png", "chorus_table.png", "coverage_strips.png")


def analyze_runs(runs: RunSet, out_dir: str | Path, experts: list[str] | None = None, k: int = 5,
                 min_rate: float = 0.5, n_boot: int = 1000, alpha: float = 0.05, seed: int = 0) -> dict:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = chorus_table(runs.table, runs.runs, experts, k=k, min_rate=min_rate, n_boot=n_boot, alpha=alpha, seed=seed)
    markdown = to_markdown(table, alpha)
    (out / "table.md").write_text(markdown + "\n")
    table.to_csv(out / "table.csv", index=False)
    t = align_tasks(runs.table)
    chosen = choose_experts(runs.runs, experts)
    sets = solved_sets(task_matrix(t, "passed")[chosen], min_rate)
    plots.complementarity_heatmap(jaccard_matrix(sets), unique_solves(sets), out / PLOTS[0])
    plots.chorus_bars(table, out / PLOTS[1])
    listed = [r for r in table["run"] if r in set(t["run"])]  # the table's order: stages, experts, merges
    plots.coverage_strips(task_matrix(t, "coverage")[listed], out / PLOTS[2])
    return {"table": table, "markdown": markdown, "files": [str(out / p) for p in ("table.md", "table.csv", *PLOTS)]}
