"""`python -m chorus.analyze study=[seed dirs] out=DIR`: the study's table and verdict from the kept
evidence alone, written to DIR/study.json and printed as markdown.

study.json: {"design", "revision", "machine", "seeds": [seed dir names], "n_tasks": {seed: n},
"rows": {name: {"per_seed": {seed: {estimate, lo, hi}}, "pooled": {estimate, lo, hi, tau2, i2, q,
seeds}}}, "tests": {"pattern_p": {seed: p, "pooled": p}, "secondary_p", "holm", "holm_alpha"}, "verdict": {...},
"comparisons": {...counted}, "notes": [...]}. Units: Pass@1 points; pattern_difference in points^2.
Intervals are 95 % (premise rows: 90 %, the TOST's).
"""
from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.stats import N_BOOT
from ..tracking.runs import OneLineError
from . import patterns, study
from .matrix import align_tasks
from .study_manifest import Manifest, StudyError, check_study, read_manifest

STUDY_FILE = "study.json"


def load_seed(m: Manifest, pass_coverage: float | None = None):
    """The aligned per-sample table of a manifest's runs and their labels by run dir."""
    import warnings

    from ..tracking.runs import load_run_dirs, with_pass_rule

    runs = with_pass_rule(load_run_dirs(m.runs(), f"the runs of {m.root}"), pass_coverage)
    if runs.skipped:
        raise ValueError(f"{m.root}: run {runs.skipped[0][0]} has no results ({runs.skipped[0][1]})")
    labels = dict(zip(runs.runs["path"], runs.runs["run"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # every run is read on the tasks all share; n_tasks says how many
        return align_tasks(runs.table), labels


@contextmanager
def one_line(where: Path | None = None):
    """A study that cannot be analysed raises StudyError: its first line, naming the seed dir `where`
    when it does not already, so the study notebook shows that line rather than a traceback through
    chorus.analysis (the CLI prints the same line)."""
    try:
        yield
    except OneLineError:
        raise
    except ValueError as exc:
        line = (str(exc).splitlines() or [""])[0]
        raise StudyError(line if where is None or line.startswith(str(where)) else f"{where}: {line}") from exc


def analyse(seed_dirs: list[str], alpha: float = 0.05, seed: int = 0, n_boot: int = N_BOOT,
            pass_coverage: float | None = None, amended: tuple[str, ...] = ()) -> dict:
    """Every seed's rows and the pooled ones, tests and verdict, as study.json holds them. `amended`:
    the roles a pre-registered amendment re-ran at another revision (read_manifest); study.json
    names them and their revisions."""
    if not seed_dirs:
        raise StudyError("study=[...] needs at least one seed dir")
    names = [Path(d).name for d in seed_dirs]
    if len(set(names)) < len(names):
        raise StudyError(f"study: seed dirs {list(seed_dirs)} share a name; give dirs with distinct names")
    with one_line():
        manifests = [read_manifest(d, tuple(amended)) for d in seed_dirs]
        check_study(manifests)
    seeds = []
    for i, m in enumerate(manifests):
        with one_line(m.root):
            table, labels = load_seed(m, pass_coverage)
            seeds.append(study.seed_rows(table, m, labels, seed=seed + i, n_boot=n_boot))
    pooled = study.pool(seeds, alpha, seed)
    rows = {name: {"per_seed": {n: s["rows"][name].as_dict() for n, s in zip(names, seeds) if name in s["rows"]},
                   "pooled": pooled["rows"][name]} for name in pooled["rows"]}
    notes = [f"{n}: {x}" for n, s in zip(names, seeds) for x in s["notes"]]
    if manifests[0].design == 1:
        notes.insert(0, "design 1 (v1): the staged experts share one RL seed and only one stage has RL-seed "
                        "siblings, so stage and RL seed are confounded; the pattern test is not the v2 one")
    tests = {**pooled["tests"], "pattern_p": {**{n: s["tests"]["pattern_p"] for n, s in zip(names, seeds)
                                                 if "pattern_p" in s["tests"]},
                                              **({"pooled": pooled["tests"]["pattern_p"]}
                                                 if "pattern_p" in pooled["tests"] else {})}}
    return {"design": manifests[0].design, "revision": manifests[0].revision, "machine": manifests[0].machine,
            "seeds": names, "n_tasks": {n: s["n_tasks"] for n, s in zip(names, seeds)},
            "experts": {n: s["experts"] for n, s in zip(names, seeds)}, "rows": rows, "tests": tests,
            "verdict": pooled["verdict"], "comparisons": counted(rows), "notes": notes,
            **({"amended": {n: m.amended for n, m in zip(names, manifests)}} if amended else {})}


def pattern_matrix(seed_dir: str | Path, pass_coverage: float | None = None) -> tuple[pd.DataFrame, list[str]]:
    """One seed's noise-corrected pattern dissimilarity between its experts (points^2, the primary
    statistic's D; chorus.analysis.patterns), labelled by run, and each expert's stage, stage-major."""
    m = read_manifest(seed_dir)
    table, labels = load_seed(m, pass_coverage)
    experts, stages = study.stage_major(m, labels)
    rates = patterns.Rates.from_table(table, experts)
    d = patterns.dissimilarity(rates.p, rates.n)
    return pd.DataFrame(d, index=experts, columns=experts), stages


def counted(rows: dict) -> dict:
    """How many intervals the table prints, and how many of them are claims under a rule."""
    per_seed = sum(len(r["per_seed"]) for r in rows.values())
    claims = {"premise (all pairs must hold: intersection-union, no correction)": 3,
              "primary (one test)": 1, f"secondary (Holm over {len(study.SECONDARY)})": len(study.SECONDARY)}
    if {"positive_opd_vs_best", "positive_opd_vs_self"} <= set(rows):
        claims["OPD consolidates (vs the best family expert and vs its own-teacher control: both must hold)"] = 2
    return {"intervals_per_seed": per_seed, "intervals_pooled": len(rows), "claims": claims,
            "reported_without_a_rule": len(rows) - sum(claims.values())}


def write(result: dict, out: str | Path) -> Path:
    """out/study.json, and beside it study.md (the table and verdict as printed) and study_rows.png
    (every row per seed and pooled); returns study.json's path."""
    from .plots import study_rows

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / STUDY_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1, default=float))
    tmp.replace(path)
    (out / "study.md").write_text(markdown(result) + "\n")
    study_rows(result, path=out / "study_rows.png")
    return path


def _ci(r: dict, unit: str = "") -> str:
    if any(np.isnan([r["estimate"], r["lo"], r["hi"]])):
        return "-"
    return f"{r['estimate']:+.1f} [{r['lo']:+.1f}, {r['hi']:+.1f}]{unit}"


def _amended(result: dict) -> list[str]:
    """The line naming the runs an amendment re-ran at another revision (none: no line)."""
    runs = sorted({f"{role} at `{rev}`" for by_role in result.get("amended", {}).values()
                   for role, rev in by_role.items()})
    return [f"Amended (re-run at another revision, pre-registered): {', '.join(runs)}."] if runs else []


def markdown(result: dict) -> str:
    """The study table (every row per seed and pooled) and the verdict with what it rests on."""
    names = result["seeds"]
    lines = [f"Study design {result['design']}, {len(names)} seeds, git `{result['revision']}`, machine "
             f"`{result['machine']}`; tasks per seed: {', '.join(str(result['n_tasks'][n]) for n in names)}. "
             "Pass@1 points (pattern_difference: points^2); 95 % intervals (premise: 90 %); pooled: random "
             "effects, Hartung-Knapp interval.", *_amended(result), "",
             "| row | " + " | ".join(names) + " | pooled | I^2 |", "|---|" + "---|" * (len(names) + 2)]
    for name, r in result["rows"].items():
        cells = [_ci(r["per_seed"][n]) if n in r["per_seed"] else "-" for n in names]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {_ci(r['pooled'])} | {100 * r['pooled']['i2']:.0f} % |")
    t, v = result["tests"], result["verdict"]
    yes = {True: "holds", False: "fails"}
    pp = t.get("pattern_p", {})
    level, m = f"{100 * t['holm_alpha']:g} %", len(t["secondary_p"])
    lines += ["", "Tests: pattern permutation p " + ", ".join(f"{k} {p:.3g}" for k, p in pp.items()) + "; "
              f"secondary one-sided p (Holm at {level}: the i-th smallest of {m} against {level} / ({m} + 1 - i)): "
              + ", ".join(f"{h} {p:.3g} ({'rejects' if t['holm'][h] else 'no'})" for h, p in t["secondary_p"].items()),
              "",
              f"- premise (every pair of stage means within +-{study.PREMISE_POINTS:g} points, TOST on the pooled "
              f"90 % interval): {yes[v['premise']]}",
              f"- primary (pattern dissimilarity across stages > within, pooled permutation p <= 0.05): "
              f"{yes[v['primary']]}",
              f"- staged complementarity (staged triplets' headroom > 0, Holm over {len(study.SECONDARY)}): "
              f"{yes[v['staged_complementary']]}",
              f"- Claim \"stages give complementary experts beyond RL-seed diversity\": "
              f"{'made' if v['claim'] else 'not made'}."]
    if "opd_consolidates" in v:
        lines.append("- OPD consolidates the positive control (positive_opd_vs_best's lower bound > 0 on >= 2 seeds "
                     f"and pooled, positive_opd_vs_self's pooled lower bound > 0): {yes[v['opd_consolidates']]}")
    c = result["comparisons"]
    lines += ["", f"Counted: {c['intervals_per_seed']} per-seed and {c['intervals_pooled']} pooled intervals; "
              f"claims under a rule: {sum(c['claims'].values())} ({'; '.join(f'{k}: {n}' for k, n in c['claims'].items())})"
              f"; the other {c['reported_without_a_rule']} rows are reported without a rule."]
    lines += [f"- note: {n}" for n in result["notes"]]
    return "\n".join(lines)
