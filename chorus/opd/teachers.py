"""The teacher pool: each teacher's checkpoint and its per-task execution rewards.

Rewards come from an evaluation run's per-task table (`rewards: <run dir or per_task file>`) or
are estimated online from K teacher samples per task (`source: online`), once per task and cached
in the run dir. Either way the gate compares pass rates (the study's metric: whether each sample
reaches its task's target), the teachers' as the student's, and harness errors are left out of the
mean: the gate compares like with like. A table that lacks some training tasks (or has only harness
errors for them) either raises or falls back, as `teacher_pool.missing` says (error | online | skip)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from ..config.schema import Teacher  # Teacher: one entry of teacher_pool.teachers
from ..core.modes import MissingRewards, TeacherSource
from ..tracking.identity import variants
from ..tracking.run_dir import PARQUET, TABLE, kept_answers, read_table


def check_teachers(teachers: list[Teacher]) -> None:
    """Refuse a pool that cannot run, naming every teacher without a checkpoint in one line (and
    the fix for each), so a fresh clone learns all it must train at once."""
    if not teachers:
        raise ValueError("the teacher pool is empty; pick teacher_pool=three_experts|two_experts|single")
    missing = [f"{t.name} ({t.checkpoint}: {_variants(Path(t.checkpoint), i, t.name)})"
               for i, t in enumerate(teachers) if not (Path(t.checkpoint) / "config.json").exists()]
    if missing:
        raise ValueError(f"{len(missing)} of {len(teachers)} teachers have no checkpoint: {'; '.join(missing)}. "
                         "Train them all with `python -m chorus.pipeline`, or point the pool at a pipeline's "
                         "experts with teacher_pool.from_runs=<its runs dir>")
    for t in teachers:
        if t.source not in list(TeacherSource):
            raise ValueError(f"teacher {t.name}: unknown reward source {t.source!r}; use online or table")
        if t.source == "table" and not _table_path(t.rewards):
            raise ValueError(f"teacher {t.name}: reward table {t.rewards} not found; evaluate the teacher on the "
                             f"training tasks with `python -m chorus.evaluate policy=model ...` or use source: online")


def _variants(checkpoint: Path, index: int, name: str) -> str:
    """The fix for a missing teacher: the runs of its group path made with other settings, else how
    to train the expert."""
    found = variants(checkpoint.parent) if checkpoint.name == "hf" else []
    if found:
        return (f"{checkpoint.parent.parent} holds {', '.join(p.name for p in found[:3])} (made with other "
                f"settings); pass teacher_pool.teachers.{index}.checkpoint={found[0] / 'hf'} to use one")
    return (f"train it with `python -m chorus.train job=rl sft_stage={name}`, or pass "
            f"teacher_pool.teachers.{index}.checkpoint=<an existing model>")


UNTAGGED = re.compile(r"-[0-9a-f]{8}")  # what follows a group path's name in a run dir made without run_tag


def pool_from_runs(teachers: list[dict], base: str | None, runs_dir: str, from_runs: str) -> tuple[list[dict], str | None]:
    """A pool's teachers and base found in another runs dir (a pipeline's): each checkpoint under
    runs_dir is looked up at the same group path under `from_runs`, plain or made with other settings
    (<dir>-<hash>, as a pipeline's steps are; tagged runs, <dir>-<tag>-<hash>, are variants and not
    looked at). Exactly one run must match each; paths outside runs_dir are kept as given."""
    root, other = Path(runs_dir), Path(from_runs)
    if not other.is_dir():
        raise ValueError(f"teacher_pool.from_runs={from_runs} is not a folder; give the runs dir of a pipeline "
                         "(e.g. runs/pipeline/staged/seed0)")

    def find(checkpoint: str | None, what: str) -> str | None:
        if not checkpoint:
            return checkpoint
        try:
            rel = Path(checkpoint).relative_to(root)
        except ValueError:
            return checkpoint
        if rel.name != "hf" or len(rel.parts) < 2:
            return str(other / rel)
        group = other / rel.parent
        # the plain dir, or one with only the hash of its settings; a run_tag marks a deliberate variant
        # (a pipeline's other experts and controls: -rl<j>, -fam<i>), never the pool's expert
        hashed = [d / "hf" for d in group.parent.glob(f"{group.name}-*") if UNTAGGED.fullmatch(d.name[len(group.name):])]
        found = sorted(p.parent for p in [group / "hf", *hashed] if (p / "config.json").exists())
        if not found and what == "teacher_pool.base":
            return None  # only task-vector merges read a base; they say so when it is missing
        if len(found) != 1:
            held = ", ".join(str(p) for p in found) if found else "none"
            raise ValueError(f"teacher_pool.from_runs={from_runs}: {what} needs exactly one run at {group}[-*] "
                             f"with hf/, found {held}; pass its checkpoint= instead")
        return str(found[0] / "hf")

    resolved = [{**t, "checkpoint": find(t["checkpoint"], f"teacher {t['name']}")} for t in teachers]
    return resolved, find(base, "teacher_pool.base")


# What the gate reads from each row of an evaluation's per-task table (chorus.scoring.result_row).
REWARD_COLUMNS = ("status", "passed")


def _table_path(where: str | None) -> Path | None:
    if not where:
        return None
    p = Path(where)
    for cand in (p, p / PARQUET, p / TABLE):
        if cand.is_file():
            return cand
    return None


def gate_value(row: dict) -> float | None:
    """What the gate compares for one sample: 1.0 if it passed, else 0.0; None for a harness error
    (chorus failed, not the policy)."""
    return None if row["status"] == "harness_error" else float(bool(row["passed"]))


def mean_rewards(rows) -> dict[str, float | None]:
    """Per task, the pass rate of its samples (rows with task_id, status, passed, as
    chorus.scoring.result_row writes them) that are not harness errors; None for a task whose samples
    are all harness errors: it has no value, like a task never evaluated."""
    values: dict[str, list[float]] = {}
    for r in rows:
        value = gate_value(r)
        values.setdefault(r["task_id"], [])
        if value is not None:
            values[r["task_id"]].append(value)
    return {k: sum(v) / len(v) if v else None for k, v in values.items()}


def table_rewards(where: str) -> dict[str, float | None]:
    """`mean_rewards` over an evaluation's per-task table (its kept answers).

    `passed` is the evaluation's own verdict on the exact coverage. It is the student's (coverage >=
    the task's target) when the evaluation ran with simulator.strict_instance=false, the default."""
    path = _table_path(where)
    df = kept_answers(read_table(path))
    absent = [c for c in ("task_id", *REWARD_COLUMNS) if c not in df]
    if absent:
        raise ValueError(f"reward table {path} has no {'/'.join(absent)} column; write it with "
                         f"`python -m chorus.evaluate policy=model ...` (per_task rows) or use source: online")
    rows = ({"task_id": task_id, "status": status, "passed": not pd.isna(passed) and bool(passed)}
            for task_id, status, passed in zip(df["task_id"], df["status"], df["passed"]))
    return mean_rewards(rows)


class TeacherRewards:
    """Per-task pass rates of every teacher (what the gate compares), with the table/online/missing
    policy applied. `fallback`: per teacher, how many training tasks its table lacked and are
    estimated online instead (teacher_pool.missing=online)."""

    def __init__(self, teachers: list[Teacher], task_ids: list[str], missing: str = "error",
                 estimate=None, cache: Path | None = None):
        if missing not in list(MissingRewards):
            raise ValueError(f"teacher_pool.missing must be error, online or skip, got {missing!r}")
        self.teachers, self.missing, self.estimate, self.cache = teachers, missing, estimate, cache
        self.known: dict[str, dict[str, float]] = {t.name: {} for t in teachers}
        self.online: dict[str, set[str]] = {t.name: set() for t in teachers}
        self.fallback: dict[str, int] = {}
        for t in teachers:
            if t.source == "table":
                table = table_rewards(t.rewards)
                self.known[t.name].update({k: v for k, v in table.items() if k in set(task_ids) and v is not None})
                lacking = sorted(set(task_ids) - set(self.known[t.name]))
                if lacking and missing == "error":
                    harness = sum(k in table for k in lacking)
                    raise ValueError(f"teacher {t.name}: its reward table lacks {len(lacking)} of {len(task_ids)} "
                                     f"training tasks (e.g. {lacking[0]}; {harness} of them with only harness "
                                     f"errors); evaluate it on those tasks or set teacher_pool.missing=online|skip")
                if missing == "online" and lacking:
                    self.online[t.name].update(lacking)
                    self.fallback[t.name] = len(lacking)
            else:
                self.online[t.name].update(task_ids)
        if cache and cache.exists():
            for line in cache.read_text().splitlines():
                r = json.loads(line)
                self.known.setdefault(r["teacher"], {})[r["task_id"]] = r["reward"]

    def for_tasks(self, tasks) -> dict[str, dict[str, float | None]]:
        """{task_id: {teacher: reward or None}}; estimates online rewards not seen yet."""
        for t in self.teachers:
            todo = [task for task in tasks if task.id in self.online[t.name] and task.id not in self.known[t.name]]
            if todo:
                fresh = self.estimate(t, todo)
                self.known[t.name].update(fresh)
                if self.cache:
                    with open(self.cache, "a") as f:
                        for k, v in fresh.items():
                            f.write(json.dumps({"teacher": t.name, "task_id": k, "reward": v}) + "\n")
        return {task.id: {t.name: self.known[t.name].get(task.id) for t in self.teachers} for task in tasks}


def reference_rewards(where: str | None, task_ids: list[str]) -> tuple[dict[str, float], int]:
    """consolidation.gate_reference: per training task, what the student reaches by RL alone (the pass
    rate in a table of its DAPO expert on the training tasks); with how many training tasks the
    table lacks (the gate uses the student's own value alone for those). ({}, 0) without one."""
    if not where:
        return {}, 0
    from ..sft.stages import STAGES
    if where in STAGES:
        raise ValueError(f"consolidation.gate_reference={where} names a stage: a pipeline wires it to that stage's "
                         "expert table; outside one, pass the table's run dir or per_task file")
    if not _table_path(where):
        raise ValueError(f"consolidation.gate_reference={where}: no reward table there; evaluate the student's DAPO "
                         "expert on the training tasks with `python -m chorus.evaluate policy=model ...`")
    ids, table = set(task_ids), table_rewards(where)
    known = {k: v for k, v in table.items() if k in ids and v is not None}
    return known, len(ids - set(known))
