"""Which loaded runs can be compared task by task: those scored on the experts' split, over tasks the
experts share. A folder holds more than that: a pipeline's runs_dir keeps OPD's gate tables
(`tables/stage*`: each expert on its own training tasks) beside the held-out runs, and aligning the two
leaves no task. Runs of another split, and runs sharing no task with the experts, are set apart and
listed with why; experts that share no task with one another stop the analysis in one line."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..tracking.runs import OneLineError, RunSet
from .table import choose_experts

# Which split wins when the experts are evenly spread over several: the held-out ones first
SPLIT_ORDER = ("test", "validation")


class NoSharedTasksError(OneLineError):
    pass


@dataclass
class Comparable:
    runs: RunSet  # the runs compared: the experts' split, each sharing tasks with the experts
    split: str | None  # the experts' split; None when their tables do not say (runs before the split column)
    set_apart: pd.DataFrame  # one row per run left out: run, path, split, n_tasks, n_samples, pass_at_1, why
    messages: list[str] = field(default_factory=list)  # one line per run set apart, for a notebook to print


def run_splits(table: pd.DataFrame) -> dict[str, str | None]:
    """Each run's split ("train+test" for a table mixing them), None where its table has no split column
    or no value."""
    if "split" not in table:
        return {r: None for r in dict.fromkeys(table["run"])}
    out = {}
    for run, values in table.groupby("run", sort=False)["split"]:
        named = sorted({v for v in values if isinstance(v, str) and v})
        out[run] = "+".join(named) or None
    return out


def experts_split(splits: dict[str, str | None], experts: list[str], named: bool) -> str | None:
    """The split the experts were scored on: the one most of them share (ties: test, then validation,
    then by name). Experts named by the user must share one split, or there is nothing to compare."""
    known = [splits[e] for e in experts if splits.get(e) is not None]
    if not known:
        return None
    if named and len(set(known)) > 1:
        listed = ", ".join(f"{e} ({splits[e]})" for e in experts)
        raise NoSharedTasksError(f"the experts {listed} were scored on different splits; name experts of one split")
    rank = {s: i for i, s in enumerate(SPLIT_ORDER)}
    return min(set(known), key=lambda s: (-known.count(s), rank.get(s, len(rank)), s))


def comparable_runs(runs: RunSet, experts: list[str] | None = None) -> Comparable:
    """The runs of `runs` that compare with the experts (`experts`, else chorus.analysis.table's
    choose_experts): every run scored on the experts' split that shares a task with them. Runs of
    another split (a pipeline's gate tables, scored on the training split) and runs sharing none of
    the experts' common tasks are set apart, one message each. Runs whose table does not say its
    split are kept. NoSharedTasksError (one line, naming them) when the experts share no task."""
    chosen = choose_experts(runs.runs, experts) or list(runs.runs["run"])  # only consolidations: compare them all
    splits = run_splits(runs.table)
    split = experts_split(splits, chosen, named=bool(experts))
    tasks = {r: set(t) for r, t in runs.table.groupby("run", sort=False)["task_id"].unique().items()}
    why: dict[str, str] = {}
    for r in runs.runs["run"]:
        if split is not None and splits.get(r) not in (None, split):
            why[r] = f"its {len(tasks[r])} tasks are on the {splits[r]} split, the experts' on {split}"
    kept = [e for e in chosen if e not in why]
    shared = set.intersection(*(tasks[e] for e in kept)) if kept else set()
    if not shared:
        listed = ", ".join(f"{e} ({len(tasks[e])} tasks)" for e in kept or chosen)
        raise NoSharedTasksError(f"the experts {listed} share no task: there is nothing to compare them on; "
                                 "point at runs scored on the same tasks (or name the experts to compare)")
    for r in runs.runs["run"]:
        if r not in why and not tasks[r] & shared:
            why[r] = f"none of its {len(tasks[r])} tasks is among the {len(shared)} the experts share"
    keep = ~runs.runs["run"].isin(list(why))
    compared = RunSet(runs.table[runs.table["run"].isin(set(runs.runs.loc[keep, "run"]))].reset_index(drop=True),
                      runs.runs[keep].reset_index(drop=True), runs.skipped)
    apart = runs.runs.loc[~keep, ["run", "path", "n_tasks", "n_samples"]].reset_index(drop=True)
    rates = runs.table[runs.table["run"].isin(list(why))].groupby(["run", "task_id"])["passed"].mean()
    apart.insert(2, "split", [splits.get(r) for r in apart["run"]])
    apart["pass_at_1"] = [float(rates[r].mean()) for r in apart["run"]]
    apart["why"] = [why[r] for r in apart["run"]]
    return Comparable(compared, split, apart, [f"set apart {r}: {why[r]}" for r in apart["run"]])
