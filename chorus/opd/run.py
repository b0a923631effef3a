"""Run adaptive multi-teacher OPD: the RL runner's loop with OPD's rollout and objective."""
from __future__ import annotations

import functools
import json
from pathlib import Path

from ..policy.engines import SamplingParams
from ..policy.models import load_model
from ..rl.algos import OPD_ALGO
from ..rl.rewards import RewardConfig, reward
from ..rl.run import Objective, train_rl
from ..sim import SimConfig
from .module import OPDModule
from .rollouts import TeacherModels, collect_opd
from .teachers import Teacher, TeacherRewards, check_teachers


def online_estimator(fmt: str, sim: SimConfig, rl: dict, samples: int, workers: int | None, dtype: str, seed: int):
    """K teacher samples per task, scored like the student's: the online teacher reward."""
    from ..policy.engines import HFEngine
    from ..protocol.direct import run_direct

    def estimate(teacher: Teacher, tasks) -> dict[str, float]:
        model, tok = load_model("hf", path=teacher.checkpoint, dtype=dtype)
        rows = run_direct(tasks, HFEngine(model, tok), tok, fmt, samples,
                          SamplingParams(max_new_tokens=rl["max_new_tokens"], temperature=rl["temperature"], seed=seed),
                          sim, workers=workers, max_prompt_tokens=rl["max_prompt_tokens"], progress=False)
        cfg = RewardConfig(**rl["reward"])
        by_task: dict[str, list[float]] = {}
        for r in rows:
            value = reward(r["status"], r["overall"], r["passed"], cfg)
            if value is not None:
                by_task.setdefault(r["task_id"], []).append(value)
        return {t.id: (sum(by_task[t.id]) / len(by_task[t.id]) if by_task.get(t.id) else None) for t in tasks}
    return estimate


def log_decisions(out: Path, step: int, batch) -> None:
    with open(out / "decisions.jsonl", "a") as f:
        for d in batch.decisions:
            f.write(json.dumps({"step": step, **d}) + "\n")


def train_opd(student: str, out_dir: str | Path, teachers: list[Teacher], opd: dict, rl: dict, tasks, eval_tasks,
              fmt: str, sim: SimConfig, trainer: dict, missing: str = "error", online_samples: int = 4,
              workers: int | None = None, seed: int = 0, dtype: str = "float32", meta: dict | None = None,
              log_step=None) -> dict:
    """Distil the teachers into `student` on its own samples, task by task where a teacher wins."""
    check_teachers(teachers)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rewards = TeacherRewards(teachers, [t.id for t in tasks], missing,
                             online_estimator(fmt, sim, rl, online_samples, workers, dtype, seed),
                             cache=out / "teacher_rewards.jsonl")
    models = TeacherModels(teachers, keep_in_memory=opd["teachers_in_memory"] or opd["mode"] == "direct",
                           dtype=dtype)
    order = [t.name for t in teachers]
    collect = functools.partial(collect_opd, rewards=rewards, teachers=models, order=order, margin=opd["margin"],
                                micro_batch=rl["micro_batch"])
    module = functools.partial(OPDModule, mode=opd["mode"], divergence=opd["divergence"], beta=opd["beta"],
                               teachers=models)
    return train_rl(student, out, OPD_ALGO, rl, tasks, eval_tasks, fmt, sim, trainer, workers=workers, seed=seed,
                    dtype=dtype, meta={**(meta or {}), "teachers": order},
                    objective=Objective(collect=collect, module=module, log_batch=log_decisions), log_step=log_step)


def resolve_student(choice: str, teachers: list[Teacher], runs_dir: str | Path, out: Path,
                    weights: list[float] | None = None) -> str:
    """The OPD student's init: the soup of the pool, a stage checkpoint, a teacher, or a path."""
    from ..merge.stream import merge_checkpoints
    from ..sft.stages import STAGES, stage_checkpoint

    if choice == "soup":
        target = Path(out) / "student_soup"
        if not (target / "config.json").exists():
            merge_checkpoints("soup", [t.checkpoint for t in teachers], target, weights=weights)
        return str(target)
    if choice in STAGES:
        return str(stage_checkpoint(runs_dir, choice))
    named = {t.name: t.checkpoint for t in teachers}
    if choice in named:
        return named[choice]
    if (Path(choice) / "config.json").exists():
        return choice
    raise ValueError(f"consolidation.student={choice!r} is neither soup, a stage, a teacher of the pool "
                     f"({sorted(named)}) nor a checkpoint directory")
