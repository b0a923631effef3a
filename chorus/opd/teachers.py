"""The teacher pool: each teacher's checkpoint and its per-task execution rewards.

Rewards come from an evaluation run's per-task table (`rewards: <run dir or per_task file>`) or
are estimated online from K teacher samples per task (`source: online`), once per task and cached
in the run dir. A table that lacks some training tasks either raises or falls back, as
`teacher_pool.missing` says (error | online | skip)."""
from __future__ import annotations

import json
from pathlib import Path

from ..config_schema import Teacher  # one entry of teacher_pool.teachers
from ..modes import MissingRewards, TeacherSource
from ..tracking.identity import variants
from ..tracking.run_dir import PARQUET, TABLE, kept_answers, read_table


def check_teachers(teachers: list[Teacher]) -> None:
    if not teachers:
        raise ValueError("the teacher pool is empty; pick teacher_pool=three_experts|two_experts|single")
    for i, t in enumerate(teachers):
        if not (Path(t.checkpoint) / "config.json").exists():
            raise ValueError(f"teacher {t.name}: no checkpoint at {t.checkpoint}; "
                             + _variants(Path(t.checkpoint), i, t.name))
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
    return (f"produce it with `python -m chorus.train job=rl sft_stage={name}` (with the settings you "
            f"want), or pass teacher_pool.teachers.{index}.checkpoint=<an existing model>")


def _table_path(where: str | None) -> Path | None:
    if not where:
        return None
    p = Path(where)
    for cand in (p, p / PARQUET, p / TABLE):
        if cand.is_file():
            return cand
    return None


def table_rewards(where: str) -> dict[str, float]:
    """Mean reward (coverage / 100, no coverage = 0) per task over the table's samples."""
    df = kept_answers(read_table(_table_path(where)))
    return (df["overall"].fillna(0.0) / 100.0).groupby(df["task_id"]).mean().to_dict()


class TeacherRewards:
    """Per-task rewards of every teacher, with the table/online/missing policy applied."""

    def __init__(self, teachers: list[Teacher], task_ids: list[str], missing: str = "error",
                 estimate=None, cache: Path | None = None):
        if missing not in list(MissingRewards):
            raise ValueError(f"teacher_pool.missing must be error, online or skip, got {missing!r}")
        self.teachers, self.missing, self.estimate, self.cache = teachers, missing, estimate, cache
        self.known: dict[str, dict[str, float]] = {t.name: {} for t in teachers}
        self.online: dict[str, set[str]] = {t.name: set() for t in teachers}
        for t in teachers:
            if t.source == "table":
                table = table_rewards(t.rewards)
                self.known[t.name].update({k: v for k, v in table.items() if k in set(task_ids)})
                lacking = sorted(set(task_ids) - set(table))
                if lacking and missing == "error":
                    raise ValueError(f"teacher {t.name}: its reward table lacks {len(lacking)} of {len(task_ids)} "
                                     f"training tasks (e.g. {lacking[0]}); evaluate it on those tasks or set "
                                     f"teacher_pool.missing=online|skip")
                if missing == "online":
                    self.online[t.name].update(lacking)
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
