"""PNG plots of an analysis; each returns its matplotlib Figure (no pyplot state, no display needed)."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

KIND_COLORS = {"sft stage": "#9e9e9e", "expert": "#4c72b0", "oracle": "#55a868", "consolidated": "#c44e52",
               "other": "#8172b2"}


def _save(fig: Figure, path: str | Path | None) -> Figure:
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig


def complementarity_heatmap(jaccard: pd.DataFrame, unique: dict[str, set] | None = None,
                            path: str | Path | None = None) -> Figure:
    """Jaccard similarity of solved sets between runs; labels carry each run's unique solves."""
    n = len(jaccard)
    fig = Figure(figsize=(1.2 * n + 2.5, 1.0 * n + 1.5))
    ax = fig.subplots()
    im = ax.imshow(jaccard.to_numpy(dtype=float), vmin=0, vmax=1, cmap="viridis")
    names = [f"{r}\n({len(unique[r])} unique)" if unique and r in unique else r for r in jaccard.index]
    ax.set_xticks(range(n), labels=list(jaccard.columns), rotation=45, ha="right")
    ax.set_yticks(range(n), labels=names)
    for i in range(n):
        for j in range(n):
            v = jaccard.iat[i, j]
            ax.text(j, i, "n/a" if math.isnan(v) else f"{v:.2f}", ha="center", va="center",
                    color="white" if not math.isnan(v) and v < 0.6 else "black")
    fig.colorbar(im, ax=ax, label="Jaccard of solved sets")
    ax.set_title("Complementarity: overlap of solved tasks")
    return _save(fig, path)


def chorus_bars(table: pd.DataFrame, path: str | Path | None = None, metric: str = "pass_at_1") -> Figure:
    """One bar per row of chorus_table (experts, oracle union, merges, OPD) with its bootstrap CI."""
    scale = 1.0 if metric == "mean_coverage" else 100.0
    values = table[metric].to_numpy(dtype=float) * scale
    ci = np.array([c if isinstance(c, tuple) else (math.nan, math.nan) for c in table[f"{metric}_ci"]]) * scale
    err = np.nan_to_num(np.abs(np.stack([values - ci[:, 0], ci[:, 1] - values])))
    fig = Figure(figsize=(0.8 * len(table) + 3, 4))
    ax = fig.subplots()
    ax.bar(range(len(table)), values, yerr=err, capsize=3,
           color=[KIND_COLORS.get(k, "#8172b2") for k in table["kind"]])
    ax.set_xticks(range(len(table)), labels=list(table["run"]), rotation=45, ha="right")
    ax.set_ylabel({"pass_at_1": "Pass@1 (%)", "mean_coverage": "mean coverage (%)"}.get(metric, metric))
    ax.set_ylim(0, 100)
    ax.set_title("CHORUS table (bars: 95% bootstrap CI over tasks)")
    return _save(fig, path)


def coverage_strips(coverage: pd.DataFrame, path: str | Path | None = None) -> Figure:
    """Per-task coverage, one strip per run; tasks sorted by their best run's coverage."""
    order = coverage.max(axis=1).sort_values(ascending=False).index
    m = coverage.loc[order].T
    fig = Figure(figsize=(max(6, 0.25 * len(order) + 3), 0.5 * len(m) + 1.5))
    ax = fig.subplots()
    im = ax.imshow(m.to_numpy(dtype=float), aspect="auto", vmin=0, vmax=100, cmap="magma")
    ax.set_yticks(range(len(m)), labels=list(m.index))
    ax.set_xticks(range(len(order)), labels=list(order), rotation=90, fontsize=6)
    fig.colorbar(im, ax=ax, label="mean coverage (%)")
    ax.set_title("Per-task coverage")
    return _save(fig, path)


def validation_curves(curves: dict[str, pd.DataFrame], path: str | Path | None = None) -> Figure:
    """Validation Pass@1 by step for each run that chose its checkpoint on validation (rl.select_every),
    the chosen step circled."""
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    for label, d in curves.items():
        line, = ax.plot(d["step"], 100 * d["pass_rate"], marker=".", label=label)
        chosen = d[d["chosen"]]
        ax.scatter(chosen["step"], 100 * chosen["pass_rate"], s=120, facecolors="none", edgecolors=line.get_color())
    ax.set_xlabel("step")
    ax.set_ylabel("validation Pass@1 (%)")
    ax.set_title("Checkpoint choice on validation (circled: chosen)")
    ax.legend(fontsize=7)
    return _save(fig, path)


def study_rows(result: dict, names: list[str] | None = None, path: str | Path | None = None) -> Figure:
    """A study's rows (study.json's `rows`), each seed's interval and the pooled one (diamond), in
    Pass@1 points. Default: every row in points (the pattern rows are points^2 and a share)."""
    rows = result["rows"]
    names = names or [n for n in rows if not n.startswith("pattern_")]
    seeds = result["seeds"]
    fig = Figure(figsize=(7, 0.45 * len(names) + 1.5))
    ax = fig.subplots()

    labelled = set()

    def interval(r: dict, y: float, label: str, **style) -> None:  # the legend names each series once
        ax.errorbar(r["estimate"], y, xerr=[[r["estimate"] - r["lo"]], [r["hi"] - r["estimate"]]],
                    label=None if label in labelled else label, **style)
        labelled.add(label)

    for i, name in enumerate(reversed(names)):
        for k, seed in enumerate(seeds):
            r = rows[name]["per_seed"].get(seed)
            if r is not None:
                interval(r, i + 0.12 * (k - (len(seeds) - 1) / 2), seed, fmt="o", ms=3, color=f"C{k}")
        interval(rows[name]["pooled"], i - 0.35, "pooled", fmt="D", ms=5, color="black")
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_yticks(range(len(names)), labels=list(reversed(names)), fontsize=7)
    ax.set_xlabel("Pass@1 points (95 % intervals; premise rows 90 %)")
    ax.set_title(f"Study design {result['design']}: each seed and pooled (random effects)")
    # outside the axes: rows span the whole x range, so no corner inside is free
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    return _save(fig, path)


def pattern_heatmap(d: pd.DataFrame, stages: list[str], title: str = "", path: str | Path | None = None) -> Figure:
    """One seed's pattern dissimilarity between its experts (points^2), stage blocks outlined: the
    primary statistic compares the cells across blocks with those inside them."""
    n = len(d)
    fig = Figure(figsize=(0.7 * n + 3, 0.6 * n + 1.5))
    ax = fig.subplots()
    im = ax.imshow(d.to_numpy(dtype=float), cmap="viridis")
    ax.set_xticks(range(n), labels=list(d.columns), rotation=45, ha="right", fontsize=7)
    ax.set_yticks(range(n), labels=list(d.index), fontsize=7)
    edges = [k for k in range(1, n) if stages[k] != stages[k - 1]]
    for e in edges:
        ax.axhline(e - 0.5, color="white", lw=1.5)
        ax.axvline(e - 0.5, color="white", lw=1.5)
    for i in range(n):
        for j in range(n):
            ax.text(j, i, f"{d.iat[i, j]:.0f}", ha="center", va="center", fontsize=6, color="white")
    fig.colorbar(im, ax=ax, label="pattern dissimilarity (points^2)")
    ax.set_title(f"{title + ': ' if title else ''}experts' task patterns, across stages vs within")
    return _save(fig, path)
