"""Staged SFT (LLM4Cov's curriculum): each stage has a data mixture and starts from the previous
stage's checkpoint; `checkpoint=<path|id>` plugs in an external model instead of training."""
from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from transformers import AutoTokenizer

from ..config.schema import RLConf, SFTStageConf, TrainerConf
from ..config.job_context import JobContext, process_rank
from ..core.modes import RepairSource
from ..policy.models import resolve_path
from ..tracking.identity import variants
from ..tracking.timing import add_seconds
from ..policy.prompts import fit_messages
from ..tasks import load_tasks
from ..tracking.record import git_revision
from .data import (build_examples, check_skills, in_skills, own_repairs, prioritised_sample, score_samples,
                   task_weights, teacher_examples)
from .dataset_folder import read_dataset, write_dataset
from .run import train_sft

STAGES = ("stage0", "stage1", "stage2")


def stage_dir(runs_dir: str | Path, name: str) -> Path:
    return Path(runs_dir) / "sft" / name


def stage_checkpoint(runs_dir: str | Path, name: str) -> Path:
    ckpt = stage_dir(runs_dir, name) / "hf"
    if not (ckpt / "config.json").exists():
        found = variants(ckpt.parent)  # the stage trained with other settings: its dir carries a hash
        fix = (f"{ckpt.parent.parent} holds {', '.join(p.name for p in found[:3])} (made with other settings): "
               f"pass its checkpoint, e.g. {found[0] / 'hf'}" if found else
               f"run `python -m chorus.train job=sft sft_stage={name}` first, or pass the checkpoint")
        raise FileNotFoundError(f"stage {name} has no checkpoint at {ckpt}; {fix} "
                                f"(sft_stage.checkpoint= for job=rl, sft_stage.init= for the next stage)")
    return ckpt


def check_stage(name: str) -> None:
    if name not in STAGES:
        raise ValueError(f"unknown sft_stage {name!r}; choose one of {list(STAGES)}")


def stage_init_checkpoint(name: str, checkpoint: str | None, runs_dir: str | Path) -> str:
    """The checkpoint a job downstream of stage `name` starts from: the stage's external
    `checkpoint` when set, else the one it trained."""
    check_stage(name)
    if checkpoint:
        return resolve_path("hf", checkpoint)
    return str(stage_checkpoint(runs_dir, name))


def resolve_init(init: str | None, model: dict, runs_dir: str | Path) -> str:
    """A stage's starting point: its `init` (a stage name, whose default run dir is used, or a
    checkpoint path such as a pipeline's planned stage dir), else the configured `model` (its settings)."""
    if not init:
        return resolve_path(**model)
    if init in STAGES:
        return str(stage_checkpoint(runs_dir, init))
    if not (Path(init) / "config.json").exists():
        raise ValueError(f"sft_stage.init={init!r} is neither a stage ({list(STAGES)}) nor a checkpoint directory")
    return str(init)


def current_coverage(init: str, tasks, stage: SFTStageConf, ctx: JobContext, device="cpu",
                     prompts_per_call: int = RLConf.prompts_per_generate) -> dict[str, float]:
    """Mean coverage the starting model reaches on each task over stage.prioritise_samples direct
    samples (`prompts_per_call` tasks a generate call): the worst-state signal."""
    from ..policy.engines import HFEngine, SamplingParams
    from ..policy.models import load_model
    from ..protocol.direct import run_direct

    phase = "current coverage"
    ctx.progress.start(phase, len(tasks) * stage.prioritise_samples)
    model, tok = load_model("hf", path=init, device=device)
    rows = run_direct(tasks, HFEngine(model, tok), tok, ctx.fmt, stage.prioritise_samples,
                      SamplingParams(max_new_tokens=stage.max_new_tokens),
                      ctx.sim, workers=ctx.workers, max_prompt_tokens=stage.max_prompt_tokens, progress=False,
                      batch_tasks=prompts_per_call, timing=ctx.timing, on_progress=ctx.progress.callback(phase))
    sums: dict[str, list[float]] = {}
    for r in rows:
        sums.setdefault(r["task_id"], []).append(r["overall"] or 0.0)
    return {t: sum(v) / len(v) for t, v in sums.items()}


def mean_coverage(scored: list[tuple], per_task: int) -> dict[str, float]:
    """Each task's mean coverage over its first `per_task` scored samples (score_samples' rows): the
    worst-state signal from samples a stage already drew for its repairs, instead of drawing more."""
    covs: dict[str, list[float]] = {}
    for t, *_, cov in scored:
        if len(covs.setdefault(t.id, [])) < per_task:
            covs[t.id].append(cov)
    return {t: sum(v) / len(v) for t, v in covs.items()}


def sample_answers(init: str, tasks, stage: SFTStageConf, ctx: JobContext, device="cpu",
                   prompts_per_call: int = RLConf.prompts_per_generate) -> list[tuple]:
    """stage.own_samples completions of the starting model per task (the prompts it trains on, the
    stage's max_new_tokens, the sampler's defaults; `prompts_per_call` tasks a generate call, each with
    all its samples): (task, text) pairs."""
    from ..policy.engines import HFEngine, SamplingParams
    from ..policy.models import load_model
    from ..policy.prompts import render_prompt

    phase = "own samples"
    ctx.progress.start(phase, len(tasks) * stage.own_samples)
    model, tok = load_model("hf", path=init, device=device)
    engine, out = HFEngine(model, tok), []
    t0 = time.monotonic()
    for start in range(0, len(tasks), prompts_per_call):
        chunk = tasks[start:start + prompts_per_call]
        prompts = [render_prompt(t, ctx.fmt, tok, stage.max_prompt_tokens).text for t in chunk]
        gens = engine.generate(prompts, n=stage.own_samples,
                               params=SamplingParams(max_new_tokens=stage.max_new_tokens, seed=ctx.seed + start))
        out += [(t, g.text) for t, samples in zip(chunk, gens) for g in samples]
        ctx.progress.update(phase, len(out), len(tasks) * stage.own_samples)
    add_seconds(ctx.timing, "generation_s", time.monotonic() - t0)
    return out


def keep_skills(examples: list, skills) -> list:
    """The validated examples whose answer is a grade program or a strategy of `skills` (None: all);
    repair examples (their answers already among the candidates) as they are."""
    return [e for e in examples if e.kind != "validated" or in_skills(e.meta["grade"], skills)]


def stage_tasks(stage: SFTStageConf) -> list:
    """A stage's training tasks: generated designs (sft_stage.tasks' generator settings) or the train
    split of a task file (sft_stage.tasks.name=jsonl, e.g. written by chorus.ingest)."""
    opts = dataclasses.asdict(stage.tasks)
    name, path = opts.pop("name"), opts.pop("path")
    if name == "generated":
        return load_tasks("generated", split="train", **opts)
    if name != "jsonl":
        raise ValueError(f"sft_stage.tasks.name={name!r}: use generated or jsonl")
    tasks = load_tasks("jsonl", path=path, split="train", **({"prune": opts["prune"]} if opts["prune"] else {}))
    if not tasks:
        raise ValueError(f"sft_stage.tasks.path={path} has no task in the train split; ingest more designs (or "
                         "another ingest split_seed) so some are training designs")
    return tasks


def stage_examples(stage: SFTStageConf, init: str, tasks: list, ctx: JobContext, fit, device,
                   prompts_per_call: int) -> tuple[list, dict | None]:
    """The stage's examples of its kinds, from its candidate sources (reference programs, random
    programs, a teacher's samples and repairs) and, with repair_from=own, the starting model's failures;
    and the worst-state coverage when those own samples already give it (else None)."""
    t0 = time.monotonic()
    sources = {str(c) for c in stage.candidates}
    own = stage.repair_from == RepairSource.own and "repair" in stage.kinds
    skills = stage.skills
    repair_skills = stage.repair_skills if own and stage.repair_skills is not None else skills
    for given in (skills, repair_skills):
        check_skills(given)
    both = None if skills is None or repair_skills is None else sorted({*skills, *repair_skills})
    grades = tuple(str(g) for g in stage.grades) if "reference" in sources else ()
    examples = build_examples(tasks, ctx.fmt, ctx.sim, stage.min_coverage,
                              repair="repair" in stage.kinds and not own, grades=grades,
                              strategies=stage.strategies and "reference" in sources, skills=both,
                              random="random" in sources, workers=ctx.workers, executor=ctx.executor,
                              on_progress=ctx.progress.callback("sft data"), prompt=fit)
    # a repair may point at an answer of repair_skills; the stage's validated answers keep to `skills`
    repair_targets = keep_skills(examples, repair_skills)
    examples = keep_skills(examples, skills)
    add_seconds(ctx.timing, "simulation_wait_s", time.monotonic() - t0)  # the answers are scored by simulation
    if "teacher" in sources:
        examples += teacher_stage_examples(stage, init, tasks, ctx, fit, device, examples)
    coverage = None
    if own:  # repairs start from the starting model's own failed samples, with their real feedback
        samples = sample_answers(init, tasks, stage, ctx, device=device, prompts_per_call=prompts_per_call)
        t0 = time.monotonic()
        scored = score_samples(samples, ctx.fmt, ctx.sim, ctx.workers, ctx.executor)
        examples += own_repairs(samples, repair_targets, ctx.fmt, ctx.sim, stage.min_coverage, prompt=fit,
                                scored=scored)
        add_seconds(ctx.timing, "simulation_wait_s", time.monotonic() - t0)
        if stage.own_samples >= stage.prioritise_samples:  # the same draws give the worst-state signal
            coverage = mean_coverage(scored, stage.prioritise_samples)
    return [e for e in examples if e.kind in stage.kinds], coverage


def teacher_stage_examples(stage: SFTStageConf, init: str, tasks: list, ctx: JobContext, fit, device,
                           examples: list) -> list:
    """The teacher's validated answers and repair pairs (sft/teacher.py), its failed samples paired with
    its passing repair or the best validated answer among `examples` and its own."""
    from ..sim.cache import default_cache_root
    from .teacher import check_reachable, open_teacher, sample_teacher, teacher_name

    teacher = dataclasses.asdict(stage.teacher)
    teacher["engine"] = str(teacher["engine"])
    engine, tok = open_teacher(teacher, init, default_cache_root(ctx.sim.cache_dir), device)
    check_reachable(engine)
    bar = (lambda t: t.target) if stage.min_coverage is None else (lambda t: stage.min_coverage)
    phase = "teacher samples"
    ctx.progress.start(phase, len(tasks) * teacher["samples"])
    scored = sample_teacher(tasks, engine, tok, teacher, ctx.fmt, ctx.sim, ctx.workers, ctx.executor, bar,
                            on_progress=ctx.progress.callback(phase), timing=ctx.timing)
    provenance = {"teacher_engine": teacher["engine"], "teacher_model": teacher_name(teacher, init),
                  "temperature": teacher["temperature"], "top_p": teacher["top_p"], "top_k": teacher["top_k"],
                  "max_new_tokens": teacher["max_new_tokens"], "samples_per_task": teacher["samples"]}
    return teacher_examples(scored, ctx.fmt, fit, bar, examples, provenance, repair="repair" in stage.kinds)


def run_stage(stage: SFTStageConf, init: str | None, ctx: JobContext, trainer: TrainerConf | None = None,
              prompts_per_call: int = RLConf.prompts_per_generate) -> dict:
    """Train (or, with stage.checkpoint, register) one stage from `init` into the run dir on `trainer`
    (default: the CPU); the starting model's own samples are drawn `prompts_per_call` tasks a generate
    call (rl.prompts_per_generate). SFT keeps float32 master weights (ctx.dtype is not read; trainer.precision sets
    the compute); ctx.on_step hears each step's loss. Ranks other than 0 return {}."""
    from ..trainer_setup import eval_device

    trainer = trainer or TrainerConf()
    check_stage(stage.name)
    if stage.prioritise_samples < 1 or stage.own_samples < 1:
        raise ValueError(f"sft_stage.prioritise_samples and sft_stage.own_samples must be >= 1, got "
                         f"{stage.prioritise_samples} and {stage.own_samples}")
    out = ctx.out
    if stage.checkpoint:
        info = {"stage": stage.name, "checkpoint": resolve_path("hf", stage.checkpoint), "external": True}
        out.mkdir(parents=True, exist_ok=True)
        (out / "stage.json").write_text(json.dumps(info, indent=2))
        ctx.progress.update("sft checkpoint registered", 1, 1)  # every run dir has progress.jsonl to read
        return info
    tasks = stage_tasks(stage)
    tok = AutoTokenizer.from_pretrained(init)  # the prompt budget is counted in the model's tokens
    fit = lambda t: fit_messages(t, ctx.fmt, tok, stage.max_prompt_tokens)[0]  # noqa: E731
    coverage = None
    if stage.data:  # made earlier or elsewhere: every row checked to name a training task
        examples = [e for e in read_dataset(stage.data, tasks) if e.kind in stage.kinds]
    else:
        examples, coverage = stage_examples(stage, init, tasks, ctx, fit, eval_device(trainer), prompts_per_call)
        if process_rank() == 0:  # every rank builds the same examples; one writes them
            write_dataset(examples, tasks, out / "data", stage.name, git_revision())
    if not examples:
        raise ValueError(f"stage {stage.name} has no {'/'.join(map(str, stage.kinds))} example: no candidate reached "
                         f"the bar (sft_stage.min_coverage={stage.min_coverage}; null: each task's target); lower it, "
                         "or add candidate sources (sft_stage.candidates, e.g. [random,teacher]) or a stronger teacher")
    weights = None
    if stage.prioritised:
        coverage = coverage or current_coverage(init, tasks, stage, ctx, device=eval_device(trainer),
                                                prompts_per_call=prompts_per_call)
        weights = task_weights(coverage)
        examples = prioritised_sample(examples, weights, k=stage.steps * stage.batch_size, seed=ctx.seed)
    t0 = time.monotonic()
    result = train_sft(init, examples, out, steps=stage.steps, batch_size=stage.batch_size, lr=stage.lr,
                       max_tokens=stage.max_tokens, seed=ctx.seed, warmup_steps=stage.warmup_steps,
                       trainer=trainer, on_step=ctx.on_step)
    add_seconds(ctx.timing, "training_s", time.monotonic() - t0)
    if not result:  # not rank 0: rank 0 exports and records the stage
        return {}
    info = {"stage": stage.name, "init": init, "checkpoint": result["checkpoint"], "examples": result["examples"],
            "data": str(stage.data or out / "data"), "task_weights": weights,
            "first_loss": result["losses"][0], "last_loss": result["losses"][-1], "external": False}
    (out / "stage.json").write_text(json.dumps(info, indent=2))
    return info
