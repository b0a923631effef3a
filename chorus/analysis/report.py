"""Analyse a set of runs into a directory: the CHORUS table (markdown + csv), the PNG plots and,
for a pipeline, REPORT.md."""
from __future__ import annotations

from pathlib import Path

from ..core.stats import N_BOOT
from ..tracking.runs import RunSet
from . import plots
from .complementarity import jaccard_matrix, solved_sets, unique_solves
from .matrix import align_tasks, task_matrix
from .table import choose_experts, chorus_table, headroom_markdown, random_delta_markdown, sft_delta_markdown, \
    to_markdown
from .validity import VALIDITY_NOTE

PLOTS = ("complementarity.png", "chorus_table.png", "coverage_strips.png")


def analyze_runs(runs: RunSet, out_dir: str | Path, experts: list[str] | None = None, k: int = 5,
                 min_rate: float = 0.5, n_boot: int = N_BOOT, alpha: float = 0.05, seed: int = 0,
                 power_sims: int = 0) -> dict:
    """The table, its markdown, plots and the comparisons, written to out_dir. power_sims > 0 also
    simulates the runs' own design (power.design_from_runs) for the minimum detectable Pass@1
    headroom printed beside a headroom that is not claimed."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = chorus_table(runs.table, runs.runs, experts, k=k, min_rate=min_rate, n_boot=n_boot, alpha=alpha, seed=seed)
    t = align_tasks(runs.table)
    chosen = choose_experts(runs.runs, experts)
    mde = None
    if power_sims > 0 and len(chosen) > 1:
        mde = detectable_headroom(t, chosen, power_sims, seed)
    markdown, headroom = to_markdown(table, alpha), headroom_markdown(table, alpha, {"": mde["mde"]} if mde else None)
    (out / "table.md").write_text(markdown + "\n\nCross-fitted oracle union: headroom over the best expert\n\n"
                                  + headroom + "\n")
    table.to_csv(out / "table.csv", index=False)
    sets = solved_sets(task_matrix(t, "passed")[chosen], min_rate)
    plots.complementarity_heatmap(jaccard_matrix(sets), unique_solves(sets), out / PLOTS[0])
    plots.chorus_bars(table, out / PLOTS[1])
    listed = [r for r in table["run"] if r in set(t["run"])]  # the table's order: stages, experts, merges
    plots.coverage_strips(task_matrix(t, "coverage")[listed], out / PLOTS[2])
    return {"table": table, "markdown": markdown, "headroom": headroom, "mde": mde,
            "sft_deltas": sft_delta_markdown(table, alpha), "random_deltas": random_delta_markdown(table, alpha),
            "aligned": t, "experts": chosen, "solved": sets,
            "files": [str(out / p) for p in ("table.md", "table.csv", *PLOTS)]}


def detectable_headroom(t, experts: list[str], sims: int, seed: int = 0) -> dict | None:
    """The minimum detectable Pass@1 headroom of these runs' own design (tasks, samples, levels, and
    the two-level rates read from them); None where the design cannot be simulated (one sample)."""
    from .power import design_from_runs, minimum_detectable_headroom

    try:
        design = design_from_runs(t, experts)
        return minimum_detectable_headroom(design, n_sims=sims, seed=seed)
    except ValueError:
        return None


PREMISE_POINTS = 5.0  # the paper's experts lie within this many Pass@1 points of the best


def premise(experts) -> str:
    """Whether every expert is within PREMISE_POINTS of the best on Pass@1 (the paper's premise:
    experts alike on average), as a sentence."""
    best, worst = experts["pass_at_1"].max(), experts["pass_at_1"].min()
    gap = 100 * (best - worst)
    if best == 0:  # alike only in passing nothing: nothing tells them apart, and no union can add a task
        return ("Premise untestable: no expert passes any held-out task (Pass@1 0 for all), so they cannot differ "
                "on what they solve; train longer, or evaluate on tasks within the model's reach.")
    if worst == 1:
        return "Premise untestable: every expert passes every held-out task, so no union can add one."
    if gap <= PREMISE_POINTS:
        return f"Premise met: every expert is within {PREMISE_POINTS:g} Pass@1 points of the best (spread {gap:.1f})."
    return (f"Premise not met: the experts' Pass@1 spans {gap:.1f} points (more than {PREMISE_POINTS:g}), "
            "so these are not experts that score alike, and what follows is not a test of CHORUS's claim.")


def findings(table, routing, mde: dict | None = None) -> list[str]:
    """Plain sentences computed from the table (chorus_table's) and the OPD routing (routing_table's):
    what the numbers say, nothing more; REPORT.md's "What the numbers say". `mde`: the minimum
    detectable headroom by metric suffix ("" for Pass@1), named beside a headroom not claimed."""
    t = table.set_index("run")
    experts = t[t["kind"] == "expert"]
    oracle = t[t["kind"] == "oracle"].iloc[0]
    if experts.empty:
        return []
    best_p, best_c = experts["pass_at_1"].max(), experts["mean_coverage"].max()

    def claim(name: str, suffix: str, scale: float) -> str:
        h, lo = oracle.get(f"headroom{suffix}"), oracle.get(f"headroom{suffix}_ci")
        if h is None or h != h:
            return f"{name} headroom undefined"
        floor = mde.get(suffix) if mde else None
        said = ("complementarity claimed (lower bound above 0)" if oracle.get(f"claimed{suffix}") else
                "not detected" + (f" (the minimum detectable headroom of this design is {scale * floor:.1f} points "
                                  "at 80 % power)" if floor is not None and floor == floor else ""))
        return f"{name} headroom {scale * h:+.1f} points [{scale * lo[0]:+.1f}, {scale * lo[1]:+.1f}], {said}"
    oracle_p = "undefined" if oracle["pass_at_1"] != oracle["pass_at_1"] else f"{100 * oracle['pass_at_1']:.1f} %"
    oracle_c = "undefined" if oracle["mean_coverage"] != oracle["mean_coverage"] else f"{oracle['mean_coverage']:.1f} %"
    claimed = bool(oracle.get("claimed")) or bool(oracle.get("claimed_coverage"))
    lines = [premise(experts),
             f"Experts: Pass@1 {100 * experts['pass_at_1'].min():.1f}-{100 * best_p:.1f} %, mean coverage "
             f"{experts['mean_coverage'].min():.1f}-{best_c:.1f} %. Cross-fitted oracle union: Pass@1 {oracle_p}, "
             f"coverage {oracle_c} (in-sample, which counts noise as headroom: "
             f"{100 * oracle['in_sample_pass_at_1']:.1f} % and {oracle['in_sample_mean_coverage']:.1f} %). "
             f"{claim('Pass@1', '', 100.0)}; {claim('coverage', '_coverage', 1.0)}. "
             "The claim is tested on 2 metrics in this run (one seed): 2 comparisons."
             + ("" if claimed else " Gap recovery is undefined without a claimed headroom.")
             + (f" Note: {oracle['oracle_notes']}." if isinstance(oracle.get("oracle_notes"), str) else ""),
             "Uniquely solved tasks per expert: " + ", ".join(f"{r} {int(u)}" for r, u in experts["unique"].items())
             + "."]
    for run, row in t[t["kind"] == "consolidated"].iterrows():
        parts = []
        for name, suffix, scale in (("Pass@1", "", 100.0), ("coverage", "_coverage", 1.0)):
            d, ci, b = row.get(f"vs_best{suffix}"), row.get(f"vs_best{suffix}_ci"), row.get(f"gap_recovery{suffix}_bracket")
            if d is None or d != d:
                continue
            text = f"{name} {scale * d:+.1f} points [{scale * ci[0]:+.1f}, {scale * ci[1]:+.1f}]"
            if isinstance(b, tuple) and not any(x != x for x in b):
                text += f", gap recovery between {100 * b[0]:.0f} % (in-sample) and {100 * b[1]:.0f} % (cross-fitted)"
            parts.append(text)
        lines.append(f"{run} against the best expert: " + "; ".join(parts) + ".")
        start = row.get("student_run")
        if isinstance(start, str):
            lines.append(f"{run} against its student {start}: " + "; ".join(
                f"{name} {scale * row[f'vs_student{suffix}']:+.1f} points [{scale * row[f'vs_student{suffix}_ci'][0]:+.1f}, "
                f"{scale * row[f'vs_student{suffix}_ci'][1]:+.1f}]"
                for name, suffix, scale in (("Pass@1", "", 100.0), ("coverage", "_coverage", 1.0))) + ".")
    lines += _validity_findings(t)
    for _, r in routing.iterrows():
        lines.append(f"{r['run']}: {int(r['decisions'])} routing decisions over {int(r['steps'])} steps, "
                     f"{100 * r['routed']:.0f} % distilled, {100 * r['skipped']:.0f} % skipped.")
    return lines


def _validity_findings(t) -> list[str]:
    """How much of the spread in coverage is a spread in how often a run wrote a valid sample."""
    if "validity" not in t:
        return []
    runs = t[t["kind"] != "oracle"].dropna(subset=["validity"])
    if runs.empty:
        return []
    span = lambda col, scale=1.0: scale * (runs[col].max() - runs[col].min())  # noqa: E731 (NaN skipped)
    over_valid = (f", over valid samples {span('coverage_valid'):.1f} points" if runs["coverage_valid"].notna().any()
                  else "")
    lines = ["Valid samples (parsed, compiled and simulated) / mean coverage of the valid samples: "
             + ", ".join(f"{r} {100 * v:.1f} % / " + ("no valid sample" if c != c else f"{c:.1f} %")
                         for r, v, c in zip(runs.index, runs["validity"], runs["coverage_valid"])) + ". "
             f"Across runs mean coverage over all samples spans {span('mean_coverage'):.1f} points{over_valid}, "
             f"and validity {span('validity', 100):.1f} points."]
    harness = runs["harness_errors"].fillna(0)
    if harness.gt(0).any():
        lines.append("Harness errors (chorus's failures, not the model's): "
                     + ", ".join(f"{r} {int(h)}" for r, h in harness.items() if h > 0)
                     + " samples; they count as invalid and as 0 coverage, as in the runs' summaries.")
    return lines


def _machine(steps: list[dict]) -> str:
    """The machine kind the steps' summaries record (tracking.record.machine_kind), or 'not recorded'."""
    import json

    kinds = {json.loads(p.read_text()).get("machine") for s in steps
             if (p := Path(s["run_dir"]) / "summary.json").exists()} - {None}
    return ", ".join(sorted(map(str, kinds))) or "not recorded"


TIMING = (("generation", "generation_s"), ("simulation wait", "simulation_wait_s"), ("training", "training_s"))


def steps_table(steps: list[dict]):
    """One row per pipeline step: status, wall minutes and where they went (summary.json "timing")."""
    import json

    import pandas as pd

    rows = []
    for s in steps:
        wall = s.get("seconds") or 0.0
        summary = Path(s["run_dir"]) / "summary.json"
        timing = json.loads(summary.read_text()).get("timing") if summary.exists() else None
        row = {"step": s["name"], "status": s["status"], "minutes": round(wall / 60, 1)}
        for label, key in TIMING:
            row[label] = round(timing.get(key, 0.0) / 60, 1) if timing is not None else None
        known = sum(timing.get(key, 0.0) for _, key in TIMING) if timing is not None else None
        row["other"] = round(max(0.0, wall - known) / 60, 1) if known is not None and wall else None
        rows.append({**row, "run dir": s["run_dir"]})
    return pd.DataFrame(rows)


def steps_markdown(steps: list[dict]) -> str:
    """steps_table as REPORT.md shows it: `-` where a step has no timing (cached, never ran)."""
    table = steps_table(steps)
    return table.astype(object).where(table.notna(), None).to_markdown(index=False, missingval="-")


def busy_minutes(steps: list[dict]) -> float:
    """Minutes in which at least one step ran: the union of the steps' [started, ended] intervals, so
    steps side by side count once and the gaps of a stopped and resumed pipeline not at all."""
    spans = sorted((s["started"], s["ended"]) for s in steps if "started" in s and "ended" in s)
    total, reach = 0.0, float("-inf")
    for start, end in spans:
        total += max(0.0, end - max(start, reach))
        reach = max(reach, end)
    return total / 60


def write_report(runs: str | Path | list, out_dir: str | Path, steps: list[dict] | None = None, title: str = "CHORUS",
                 k: int = 2, n_boot: int = N_BOOT, seed: int = 0, pass_coverage: float | None = None,
                 power_sims: int | None = None, appendix: str = "", diagnose: dict | None = None) -> dict:
    """REPORT.md (+ table.md/csv and the PNGs) for a list of run dirs (a pipeline's plan: nothing
    else in its runs_dir gets in) or every run under a folder. A sample passes under the rule the runs were made with, or at
    `pass_coverage` % coverage when that is given. `appendix`: markdown that ends the report (a
    pipeline's Controls section). `diagnose`: label -> run dir of the runs whose OPD steps and
    validation curves to show (default: the table's runs)."""
    import pandas as pd

    from ..tracking.runs import load_run_dirs, load_runs, with_pass_rule
    from .breakdown import breakdown
    from .complementarity import win_loss
    from .opd_diagnostics import diagnostics_markdown
    from .routing import routing_table

    runs = load_run_dirs(runs, "the plan's run dirs") if isinstance(runs, list) else load_runs(str(runs))
    targets = sorted(runs.table["target"].dropna().unique())
    runs = with_pass_rule(runs, pass_coverage)
    pass_coverage = runs.runs["pass_coverage"].iloc[0] if "pass_coverage" in runs.runs else None
    pass_coverage = None if pd.isna(pass_coverage) else float(pass_coverage)
    out = Path(out_dir)
    from .power import POWER_SIMS

    result = analyze_runs(runs, out, k=k, n_boot=n_boot, seed=seed,
                          power_sims=POWER_SIMS if power_sims is None else power_sims)
    table, t, experts, sets = result["table"], result["aligned"], result["experts"], result["solved"]
    routing = routing_table(runs.runs)
    by_family = breakdown(t, "family").pivot(index="run", columns="family", values="mean_coverage")
    meta = runs.runs.iloc[0]
    samples = t.groupby(["run", "task_id"]).size()
    per_task = f"{samples.min()}" if samples.min() == samples.max() else f"{samples.min()}-{samples.max()}"
    lines = [f"# {title}", "",
             f"Model `{meta['model']}`, git `{meta['git_revision']}`. Held-out tasks: {t['task_id'].nunique()} "
             f"({', '.join(sorted(t['difficulty'].dropna().unique()))}; families "
             f"{', '.join(sorted(t['family'].dropna().unique()))}), {per_task} samples each. "
             "Pass@1 is the mean per-task pass rate; a sample passes "
             + (f"at >= {pass_coverage:g} % coverage (this world's models never reach the tasks' targets of "
                f"{', '.join(f'{x:g}' for x in targets)} %)" if pass_coverage is not None else
                "at its task's coverage target") + ". " + VALIDITY_NOTE + " Mean coverage counts a "
             "sample with no coverage as 0. Intervals: 95 % percentile bootstrap over tasks. The oracle union is "
             "cross-fitted: per task, the expert is chosen on half of its samples and scored on the other half "
             "(both ways round, averaged over many splits), so noise is not counted as headroom; it is "
             "conservative, the choice seeing half the samples. Complementarity is claimed when the lower end of "
             "its headroom's interval over the best expert is above 0 (under any dominance the expected "
             "cross-fitted headroom is at most 0); where it is not, the minimum detectable headroom of this "
             "design at 80 % power (simulated, chorus.analysis.power) says how large a headroom could have been "
             "seen. A null of identical experts (each task's samples pooled and dealt back at random) is shown "
             "as a reference only. Consolidated models are compared with the best expert by a paired interval; "
             "gap recovery = (consolidated - best expert) / (oracle union - best expert) is given only where the "
             "headroom is claimed, as a bracket: against the in-sample oracle (too high, so the ratio too low) "
             "and against the cross-fitted one (too low, so the ratio too high).", "",
             "## The CHORUS table", "", result["markdown"], "",
             "Cross-fitted oracle union: headroom over the best expert, and whether it is claimed", "",
             result["headroom"], ""]
    if result["sft_deltas"]:
        lines += ["## Each expert against its own SFT start", "",
                  "Expert minus the SFT stage it started from, on the same tasks (what RL added); intervals: paired "
                  "bootstrap over tasks.", "", result["sft_deltas"], ""]
    if result["random_deltas"]:
        lines += ["## Each run against uniform random stimulus", "",
                  "Run minus random stimulus on the same tasks; intervals: paired bootstrap over tasks.", "",
                  result["random_deltas"], ""]
    said = findings(table, routing, {"": result["mde"]["mde"]} if result["mde"] else None)
    if said:
        lines += ["## What the numbers say", "", *[f"- {f}" for f in said], ""]
    if not routing.empty:
        lines += ["## OPD routing (share of per-task decisions)", "",
                  routing.to_markdown(index=False, floatfmt=".2f"), ""]
    lines += diagnostics_markdown(diagnose if diagnose is not None else dict(zip(runs.runs["run"], runs.runs["path"])),
                                  out / "validation_curves.png")
    lines += ["## Complementarity of the experts", "", "Jaccard overlap of solved sets (pass rate >= 0.5):", "",
              jaccard_matrix(sets).to_markdown(floatfmt=".2f"), "",
              "Tasks won on coverage by the row expert against the column expert:", "",
              win_loss(task_matrix(t, "coverage")[experts])["wins"].to_markdown(), "",
              "Mean coverage by family:", "", by_family.loc[[r for r in table["run"] if r in by_family.index]]
              .to_markdown(floatfmt=".1f"), "",
              "![complementarity](complementarity.png)", "", "![CHORUS table](chorus_table.png)", "",
              "![per-task coverage](coverage_strips.png)", ""]
    if steps:
        lines += ["## Steps", "", "Minutes per step: wall clock (the step's whole process; every attempt of a "
                  "step that was stopped and resumed), and of it the time "
                  "the job spent generating, waiting on simulations that were still running once generation "
                  "had finished (simulation overlapped with generation is not counted twice), and training "
                  "(SFT steps, RL weight updates; a resumed step's from its last attempt); `other` is the "
                  "rest (loading, checkpoints, start-up, earlier attempts).", "",
                  steps_markdown(steps), "",
                  f"Busy wall clock {busy_minutes(steps):.1f} min (at least one step running), "
                  f"{sum(s.get('seconds') or 0.0 for s in steps) / 60:.1f} step-minutes; machine: "
                  f"{_machine(steps)}.", "",
                  "Each step alone:", "", "```", *[s["command"] for s in steps if "command" in s], "```", ""]
    if runs.skipped:
        lines += ["Skipped run dirs: " + "; ".join(f"{p} ({why})" for p, why in runs.skipped), ""]
    path = out / "REPORT.md"
    path.write_text("\n".join(lines) + appendix)
    return {**result, "path": str(path)}
