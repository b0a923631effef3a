"""Load the per-task tables of many runs into one tidy table: one row per run x task x sample.

Local run dirs are found by glob; W&B runs are read through `wandb.Api` (online) into the same columns.
"""
from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePath

import pandas as pd

from .record import META_KEYS
from .run_dir import PARQUET, SUMMARY, TABLE, kept_answers, read_table

MARKERS = (SUMMARY, PARQUET, TABLE, "steps.jsonl", "stage.json")  # results, or a started RL/SFT run
# split: which task split a run's table scored (train for OPD's gate tables), so that analyses compare runs of one split
TASK_COLUMNS = ("task_id", "sample", "status", "overall", "passed", "target", "family", "difficulty", "source",
                "split")


class OneLineError(ValueError):
    """A problem with the runs a user pointed at, said in one line. The CLIs print that line; a notebook
    shows it alone too (IPython renders an exception's _render_traceback_ instead of its traceback), as
    a traceback would only show chorus's insides."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {(str(self).splitlines() or [''])[0]}"]


class NoRunsError(OneLineError):
    pass


@dataclass
class RunSet:
    table: pd.DataFrame  # run, task_id, sample, status, overall, coverage, passed, ... + run metadata
    runs: pd.DataFrame  # one row per loaded run: run, path, metadata, n_tasks, n_samples
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (run path, why it was skipped)


def runs_from_env(default: str = "runs") -> str:
    """Where a notebook reads runs: $CHORUS_RUNS (else `default`), as path_from_env resolves it."""
    return path_from_env("CHORUS_RUNS", default)


def path_from_env(var: str, default: str) -> str:
    """$var (else `default`), a relative path taken from where the user launched Jupyter. The kernel
    starts in the notebook's own folder (analysis/), so the launch dir comes from $PWD, which the
    launching shell set and the kernel inherits."""
    pattern = os.environ.get(var, default)
    if os.path.isabs(pattern):
        return pattern
    launched = os.environ.get("PWD")
    return os.path.join(launched if launched and os.path.isdir(launched) else os.getcwd(), pattern)


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and any((path / m).exists() for m in MARKERS)


def find_run_dirs(pattern: str) -> list[Path]:
    """Run dirs matching a glob (`**` recurses); a matched folder that is not a run is searched below.
    Run dirs nested in another found run (eval/step_N snapshots) belong to it and are left out."""
    found: set[Path] = set()
    for match in map(Path, glob.glob(pattern, recursive=True)):
        if is_run_dir(match):
            found.add(match)
        elif match.is_dir():
            found.update(p.parent for m in MARKERS for p in match.rglob(m) if is_run_dir(p.parent))
    return sorted(p for p in found if not any(a in found for a in p.parents))


def run_label(meta: dict, path: PurePath) -> str:
    """dapo/stage0, sft/stage1, ties/three_experts (from the run's metadata, so a run dir's
    configuration hash stays out of the tables), else the dir name."""
    job = meta.get("job")
    if job == "rl" and meta.get("rl_algo") and meta.get("sft_stage"):
        return f"{meta['rl_algo']}/{meta['sft_stage']}"
    if job == "consolidation" and meta.get("consolidation") and meta.get("teacher_pool"):
        return f"{meta['consolidation']}/{meta['teacher_pool']}"
    if job == "sft" and meta.get("sft_stage"):
        return f"sft/{meta['sft_stage']}"
    if job == "evaluate" and meta.get("policy") == "random":
        return "random stimulus"
    return path.name


def dir_label(meta: dict, path: PurePath) -> str:
    """The label with the dir's own name (dapo/stage0-1a2b3c4d): tells apart runs of one group path."""
    job = meta.get("job")
    group = {"rl": meta.get("rl_algo"), "consolidation": meta.get("consolidation"), "sft": "sft"}.get(job)
    return f"{group}/{path.name}" if group else path.name


def tidy(rows: pd.DataFrame, label: str, path: str, meta: dict) -> pd.DataFrame:
    rows = kept_answers(rows)
    df = rows[[c for c in TASK_COLUMNS if c in rows]].copy()
    df["overall"] = pd.to_numeric(df["overall"], errors="coerce")
    df["coverage"] = df["overall"].fillna(0.0)  # no coverage (compile error, ...) counts as 0, as a reward would
    df["passed"] = df["passed"].fillna(False).astype(bool)
    df.insert(0, "run", label)
    df["path"] = path
    for k in META_KEYS:
        df[k] = meta.get(k)
    return df


def _assemble(loaded: list[tuple[str, str, dict, pd.DataFrame]], skipped: list, source: str) -> RunSet:
    if not loaded:
        detail = "; ".join(f"{p}: {why}" for p, why in skipped)
        raise NoRunsError(f"no runs with per-task results in {source}" + (f" (skipped {detail})" if detail else "")
                          + "; point runs= at dirs written by chorus.train or chorus.evaluate")
    labels = [label for _, label, _, _ in loaded]
    frames, runs = [], []
    for path, label, meta, rows in loaded:
        if labels.count(label) > 1:  # one group path, several runs: tell them apart by seed, else by dir
            same = [m.get("seed") for _, lb, m, _ in loaded if lb == label]
            label = (f"{label} (seed {meta.get('seed')})" if len(set(same)) == len(same)
                     else dir_label(meta, PurePath(path)))
            if sum(dir_label(m, PurePath(p)) == label for p, _, m, _ in loaded) > 1:
                label = path
        df = tidy(rows, label, path, meta)
        frames.append(df)
        runs.append({"run": label, "path": path, **{k: meta.get(k) for k in META_KEYS},
                     "n_tasks": df["task_id"].nunique(), "n_samples": len(df)})
    return RunSet(pd.concat(frames, ignore_index=True), pd.DataFrame(runs), skipped)


def load_runs(pattern: str) -> RunSet:
    """Every run dir under `pattern`; runs without a readable, non-empty per-task table are skipped
    and listed in RunSet.skipped."""
    dirs = find_run_dirs(pattern)
    if not dirs:
        raise NoRunsError(f"runs={pattern!r} matches no run dirs (folders with {SUMMARY}, {PARQUET} or steps.jsonl); "
                          "check the path, and quote the glob so the shell does not expand it")
    return load_run_dirs(dirs, f"runs={pattern!r}")


def load_run_dirs(dirs: list[Path], source: str = "the given run dirs") -> RunSet:
    """Exactly these run dirs (e.g. the steps of one pipeline plan), skipping those without results."""
    loaded, skipped = [], []
    for d in map(Path, dirs):
        meta = json.loads((d / SUMMARY).read_text()) if (d / SUMMARY).exists() else {}
        if not ((d / PARQUET).exists() or (d / TABLE).exists()):
            skipped.append((str(d), f"no {PARQUET} or {TABLE}"))
            continue
        try:
            rows = read_table(d)
        except (OSError, ValueError) as exc:
            skipped.append((str(d), f"unreadable per-task table ({str(exc).splitlines()[0]})"))
            continue
        if rows.empty or "task_id" not in rows:
            skipped.append((str(d), "per-task table is empty"))
            continue
        loaded.append((str(d), run_label(meta, d), meta, rows))
    return _assemble(loaded, skipped, source)


def with_pass_rule(runs: RunSet, pass_coverage: float | None = None) -> RunSet:
    """The table with each sample's pass under one rule: `pass_coverage` % when given, else the rule
    the runs were made with (their summaries' pass_coverage; none = each task's target). Runs made
    under different rules are not comparable, so that is refused unless a rule is given."""
    if pass_coverage is None:
        rule = runs.runs.set_index("run")["pass_coverage"] if "pass_coverage" in runs.runs else pd.Series(dtype=float)
        rules = {None if pd.isna(v) else float(v) for v in rule}
        if len(rules) > 1:
            first = {}  # one run per rule is enough to say what differs
            for r, v in rule.items():
                first.setdefault("target" if pd.isna(v) else f"coverage >= {v:g} %", r)
            named = "; ".join(f"{r}: {why}" for why, r in sorted(first.items(), key=lambda kv: kv[1]))
            raise ValueError(f"the runs were made with different pass rules ({named}); set pass_coverage=<percent> "
                             "to compare them under one rule")
        pass_coverage = next(iter(rules), None)
    _check_stopped_at_pass(runs.runs, pass_coverage)
    if pass_coverage is None:
        return runs
    table = runs.table.assign(passed=runs.table["coverage"] >= pass_coverage, pass_coverage=pass_coverage)
    return RunSet(table, runs.runs.assign(pass_coverage=pass_coverage), runs.skipped)


def _check_stopped_at_pass(runs: pd.DataFrame, pass_coverage: float | None) -> None:
    """An agentic run that stopped each sample once it passed (protocol.stop_at=pass) has no later
    rounds for a sample that passed under its own rule, so under another rule its Pass@1 is biased."""
    if "stop_at" not in runs:
        return
    for r in runs[runs["stop_at"] == "pass"].itertuples():
        own = None if pd.isna(r.pass_coverage) else float(r.pass_coverage)
        if own != pass_coverage:
            said = "its tasks' targets" if own is None else f"coverage >= {own:g} %"
            raise ValueError(f"run {r.run} stopped its agentic rounds once a sample passed at {said}, so it cannot "
                             f"be scored at {'the targets' if pass_coverage is None else f'coverage >= {pass_coverage:g} %'}; "
                             "score it under its own rule or re-run it with protocol.stop_at=full")


def wandb_per_task(run) -> pd.DataFrame | None:
    """The per_task wandb.Table a chorus run logged, as a DataFrame."""
    for art in run.logged_artifacts():
        if art.type == "run_table" and "per_task" in art.name:
            return art.get("per_task").get_dataframe()
    return None


def wandb_filters(group: str | None = None, tags=(), job_type: str | None = None, config: dict | None = None) -> dict:
    """The W&B API's query for runs of `group` carrying every tag in `tags`, of `job_type`, with the
    given config values ({"rl.steps": 40}: chorus logs its composed config, nested)."""
    terms = ([{"group": group}] if group else []) + [{"tags": {"$in": [t]}} for t in tags] + \
        ([{"jobType": job_type}] if job_type else []) + [{f"config.{k}": v} for k, v in (config or {}).items()]
    return {"$and": terms} if terms else {}


def load_wandb_runs(project: str, filters: dict | None = None, api=None, mixed: bool = False) -> RunSet:
    """Runs of a W&B project ("entity/project") logged by chorus, in the columns load_runs gives.
    Runs of several groups (different pipelines: presets, seeds, setups) are refused unless `mixed`."""
    if api is None:
        import wandb

        api = wandb.Api()
    loaded, skipped, groups = [], [], set()
    for run in api.runs(project, filters=filters or None):
        meta = {k: run.summary.get(k) for k in META_KEYS}
        rows = wandb_per_task(run)
        if rows is None or rows.empty:
            skipped.append(("/".join(run.path), "no per_task table logged"))
            continue
        groups.add(getattr(run, "group", None))
        loaded.append(("/".join(run.path), run_label(meta, PurePath(run.name)), meta, rows))
    if len(groups) > 1 and not mixed:
        named = ", ".join(sorted(str(g) for g in groups)[:4]) + (", ..." if len(groups) > 4 else "")
        raise ValueError(f"the runs of W&B project {project!r} come from {len(groups)} groups ({named}), i.e. "
                         "different setups; pick one with wandb_filter.group=<group>, or pool them with "
                         "wandb_filter.mixed=true")
    return _assemble(loaded, skipped, f"W&B project {project!r}")
