"""Run adaptive multi-teacher OPD: the RL runner's loop with OPD's rollout and objective."""
from __future__ import annotations

import dataclasses
import functools
import json
import logging
from pathlib import Path

from ..config.schema import OPDConf, RLConf, TeacherPoolConf, TrainerConf
from ..config.job_context import JobContext
from ..policy.engines import SamplingParams
from ..policy.models import load_tokenizer
from ..rl.algos import OPD_ALGO
from ..rl.run import Objective, train_rl
from ..trainer_setup import eval_device
from .module import OPDModule
from .rollouts import OPDCollect, TeacherModels
from .teachers import Teacher, TeacherRewards, check_teachers, mean_rewards, reference_rewards

log = logging.getLogger(__name__)


def online_estimator(rl: RLConf, samples: int, ctx: JobContext, teachers: TeacherModels):
    """K teacher samples per task at the training sampling settings, scored like the student's:
    the online teacher pass rate. Each estimate is a `teacher rewards <name>` progress phase. The
    teacher generates with HF generate on the copy `teachers` gives (the one that scores the
    student's samples: held in memory, or loaded for the estimate and freed after it when teachers
    are loaded one at a time), on its device, never on a copy of its own. (A vLLM engine holds the
    student's weights: it sleeps while teachers run, from the end of the student's sampling.)"""
    from ..protocol.direct import run_direct

    tokenizers: dict[str, object] = {}  # each teacher's own, as its evaluation would use (no weights)

    def estimate(teacher: Teacher, tasks) -> dict[str, float]:
        phase = f"teacher rewards {teacher.name}"
        ctx.progress.start(phase, len(tasks) * samples)
        if teacher.name not in tokenizers:
            tokenizers[teacher.name] = load_tokenizer(teacher.checkpoint)
        tok = tokenizers[teacher.name]
        with teachers.use(teacher.name) as model:
            rows = run_direct(tasks, teacher_engine(rl)(model, tok), tok, ctx.fmt, samples,
                              SamplingParams(max_new_tokens=rl.max_new_tokens, temperature=rl.temperature,
                                             seed=ctx.seed),
                              ctx.sim, workers=ctx.workers, executor=ctx.executor,
                              max_prompt_tokens=rl.max_prompt_tokens, batch_tasks=rl.prompts_per_generate,
                              timing=ctx.timing, progress=False, on_progress=ctx.progress.callback(phase))
        by_task = mean_rewards(rows)
        return {t.id: by_task.get(t.id) for t in tasks}
    return estimate


def teacher_engine(rl: RLConf):
    """(teacher model, a tokenizer) -> the engine a teacher generates with, for its online reward
    estimate and its own samples (opd.teacher_samples): HF generate on the teacher's copy."""
    from ..policy.engines import HFEngine
    return lambda model, tokenizer: HFEngine(model, tokenizer, generation=rl.generation)


def log_decisions(out: Path, step: int, batch) -> None:
    with open(out / "decisions.jsonl", "a") as f:
        for d in batch.decisions:
            f.write(json.dumps({"step": step, **d}) + "\n")


def train_opd(student: str, pool: TeacherPoolConf, tasks, eval_tasks, ctx: JobContext, *, opd: OPDConf,
              rl: RLConf, trainer: TrainerConf | None = None, ckpt_path: str | None = None,
              select_tasks=None) -> dict:
    """Distil the pool's teachers into `student` on its own samples, task by task where a teacher's pass
    rate beats the student's by more than opd.margin (opd.routing's rule); teachers without a reward
    table are estimated online (pool.online_samples). `opd`'s combinations were checked when it was
    built (OPDConf)."""
    trainer = trainer or TrainerConf()
    teachers = list(pool.teachers)
    check_teachers(teachers)
    check_student(student, teachers)
    ctx.out.mkdir(parents=True, exist_ok=True)
    # on the student's device: eval_device until fit starts, then OPDModule.on_fit_start sets each rank's own
    models = TeacherModels(teachers, keep_in_memory=opd.teachers_in_memory, dtype=ctx.dtype,
                           device=eval_device(trainer))
    ids = [t.id for t in tasks]
    rewards = teacher_rewards(teachers, ids, pool, rl, ctx, models)
    reference, unreferenced = reference_rewards(opd.gate_reference, ids)
    if unreferenced:
        log.warning("consolidation.gate_reference lacks %d of %d training tasks; the gate compares the teachers "
                    "with the student's own pass rate there", unreferenced, len(tasks))
    order = [t.name for t in teachers]
    collect = OPDCollect(opd, rewards, models, order, reference, make_engine=teacher_engine(rl),
                         micro_batch=rl.micro_batch, logit_chunk=trainer.logit_chunk,
                         pack_sequences=trainer.pack_sequences)
    ctx = dataclasses.replace(ctx, meta={**ctx.meta, "teachers": order, "student": str(student),
                                         "student_choice": opd.student, "routing": str(opd.routing),
                                         "gate": "pass_rate",
                                         "teacher_sources": {t.name: str(t.source) for t in teachers},
                                         "table_fallback": rewards.fallback,
                                         **({"gate_reference": opd.gate_reference,
                                             "gate_reference_lacks": unreferenced} if opd.gate_reference else {})})
    return train_rl(student, OPD_ALGO, tasks, eval_tasks, ctx, rl=rl, trainer=trainer, ckpt_path=ckpt_path,
                    select_tasks=select_tasks, objective=Objective(collect=collect, module=functools.partial(
                        OPDModule, teachers=models), log_batch=log_decisions))


def teacher_rewards(teachers: list[Teacher], task_ids: list[str], pool: TeacherPoolConf, rl: RLConf, ctx: JobContext,
                    models: TeacherModels) -> TeacherRewards:
    """The teachers' pass rates on the training tasks: from their tables, the rest estimated online
    (cached in the run dir); a table's fallback to online estimates is said once (and kept in
    summary.json)."""
    rewards = TeacherRewards(teachers, task_ids, pool.missing, online_estimator(rl, pool.online_samples, ctx, models),
                             cache=ctx.out / "teacher_rewards.jsonl")
    for name, n in rewards.fallback.items():
        log.warning("teacher %s: its reward table lacks %d of %d training tasks; estimating those online "
                    "(%d samples each)", name, n, len(task_ids), pool.online_samples)
    return rewards


def check_student(student: str, teachers: list[Teacher]) -> None:
    """Refuse a student that is one of its teachers (it would distil from itself where that teacher is
    best), and a teacher whose tokenizer differs from the student's (OPD scores the student's own
    tokens under each teacher, so they must mean the same), each in one line naming the fix."""
    same = [t.name for t in teachers if Path(t.checkpoint).resolve() == Path(student).resolve()]
    if same:
        raise ValueError(f"the OPD student {student} is teacher {same[0]}'s checkpoint: a student distilling from "
                         "itself is only the own-teacher control (DAPO continuation, pipeline.controls.opd_controls="
                         "[own_teacher]); start from the soup or a stage (consolidation.student=soup|stage0)")
    vocab = load_tokenizer(student).get_vocab()
    for t in teachers:
        theirs = load_tokenizer(t.checkpoint).get_vocab()
        if theirs != vocab:
            differ = len(set(theirs.items()) ^ set(vocab.items()))
            raise ValueError(f"teacher {t.name}'s tokenizer differs from the student's ({len(theirs)} vs {len(vocab)} "
                             f"tokens, {differ} entries differ): OPD scores the student's tokens under each teacher; "
                             "use teachers and a student of one model family")


def resolve_student(choice: str, teachers: list[Teacher], runs_dir: str | Path, out: Path,
                    weights: list[float] | None = None) -> str:
    """The OPD student's init: the soup of the pool (written to <out>/student_soup unless the pipeline
    passes its soup step's checkpoint as a path), an SFT stage's checkpoint, or a path. Never one of
    the teachers (check_student says why)."""
    from ..merge.stream import merge_checkpoints
    from ..sft.stages import STAGES, stage_checkpoint

    if choice == "soup":
        target = Path(out) / "student_soup"
        if not (target / "config.json").exists():
            merge_checkpoints("soup", [t.checkpoint for t in teachers], target, weights=weights)
        return str(target)
    if choice in STAGES:
        return str(stage_checkpoint(runs_dir, choice))
    named = {t.name for t in teachers}
    if choice in named or choice.removeprefix("teacher:") in named:
        raise ValueError(f"consolidation.student={choice!r} is one of the pool's teachers: a student distilling from "
                         "itself is only the own-teacher control (pipeline.controls.opd_controls=[own_teacher]); "
                         "use soup or a stage (stage0|stage1|stage2)")
    if (Path(choice) / "config.json").exists():
        return choice
    raise ValueError(f"consolidation.student={choice!r} is neither soup, a stage (stage0|stage1|stage2) nor a "
                     "checkpoint directory")
