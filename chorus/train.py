"""python -m chorus.train job=sft sft_stage=<stage0|stage1|stage2> [sft_stage.checkpoint=<path|id>]
python -m chorus.train job=rl sft_stage=<stage> rl_algo=<dapo|grpo|dr_grpo> [trainer=cpu|gpu|ddp|fsdp]

job=sft trains (or registers) one SFT stage; its Hugging Face checkpoint lands in
<runs_dir>/sft/<stage>/hf, where the next stage and the RL jobs find it.
job=rl turns a stage checkpoint into an expert in <runs_dir>/rl/<rl_algo>/<stage>/ (hf/ + per-task
held-out table); it resumes from that dir's last checkpoint unless rl.resume=false.
Every run dir also holds .hydra/ (the composed config) and, with logger=wandb (the default,
offline unless WANDB_MODE=online and an API key), a W&B copy under wandb/.
consolidation=<method> teacher_pool=<pool> merges the pool's experts or distils them (opd) into
<runs_dir>/consolidation/<method>/<pool>/, evaluated on the held-out tasks.

Those are the dirs of runs with the groups' default settings. A run whose settings differ gets
`-<8-hex hash of the differences>` appended (and `-<run_tag>` before it when set), so no two
configurations share a dir; run.json in the dir lists the settings that identify it. A job refuses
settings it would not use (e.g. model.dtype for job=sft) and keys the schema does not know.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import hydra
from hydra import compose
from omegaconf import DictConfig, OmegaConf

from .config.schema import CONF_DIR, MERGE_SCHEMAS, TrainConf, register_configs
from .config.job_context import JobContext, process_rank
from .config.job_settings import check_settings
from .config.run_identity import run_dir
from .entry import entry_point
from .sim.config import sim_config
from .sim.executor import make_executor
from .stimulus.formats import get_format
from .tracking.identity import check_reuse, has_results, write_record
from .tracking.progress import Progress
from .tracking.record import checkpoint_model, copy_hydra_config, model_name, run_metadata
from .tracking.wandb_mirror import open_mirror, wandb_group

register_configs()


# Each job is (inputs, run): `inputs` resolves and checks everything that can fail cheaply (checkpoints,
# task sets, merge arguments) so that a bad setting stops before the W&B run or any model starts; `run`
# does the work. Both read the typed config; `c` (the same settings as plain data) is what the task
# loader and model resolver take as keyword arguments.

def sft_inputs(c: dict, conf: TrainConf) -> dict:
    from .sft.stages import check_stage, resolve_init

    stage = conf.sft_stage
    check_stage(stage.name)
    init = None if stage.checkpoint else resolve_init(stage.init, c["model"], conf.runs_dir)
    return {"init": init, "eval_tasks": rl_task_sets(c["rl"], only="eval_tasks")[0] if stage.evaluate else None}


def reporting(ctx: JobContext, mirror, phase: str, total: int) -> JobContext:
    """`ctx` with the job's per-step callback: the W&B copy and the run's progress.jsonl (with an
    ETA in the log)."""
    def on_step(step: int, scalars: dict) -> None:
        mirror.log_step(step, scalars)
        ctx.progress.update(phase, step, total)
    return dataclasses.replace(ctx, on_step=on_step)


def sft(conf: TrainConf, inputs: dict, ctx: JobContext, mirror) -> dict:
    from .heldout import evaluate_checkpoint
    from .sft.stages import run_stage

    stage = conf.sft_stage
    info = run_stage(stage, inputs["init"], reporting(ctx, mirror, "sft step", stage.steps), trainer=conf.trainer,
                     prompts_per_call=conf.rl.prompts_per_generate)
    if not info:  # a rank other than 0 of a multi-process trainer
        return info
    if stage.evaluate:  # the stage on the experts' held-out tasks, so stages and experts compare
        summary = evaluate_checkpoint(info["checkpoint"], inputs["eval_tasks"], conf.rl, ctx, meta=info,
                                      trainer=conf.trainer)
        info.update(pass_rate=summary["pass_rate"], mean_overall=summary["mean_overall"])
    else:  # no held-out table, but the stage still ends with its summary: it marks the run dir finished
        from .tracking.run_dir import write_summary

        write_summary(ctx.out, {**ctx.meta, **info, "evaluated": False, "timing": dict(ctx.timing)})
    return info


def rl_inputs(c: dict, conf: TrainConf) -> dict:
    from .sft.stages import stage_init_checkpoint

    tasks, eval_tasks = rl_task_sets(c["rl"])
    init = stage_init_checkpoint(conf.sft_stage.name, conf.sft_stage.checkpoint, conf.runs_dir)
    return {"init": init, "tasks": tasks, "eval_tasks": eval_tasks, "select_tasks": select_tasks(c["rl"])}


def rl(conf: TrainConf, inputs: dict, ctx: JobContext, mirror) -> dict:
    from .rl.algos import from_conf
    from .rl.run import train_rl
    from .rl.task_sampler import rollout_steps

    return train_rl(inputs["init"], from_conf(conf.rl_algo), inputs["tasks"], inputs["eval_tasks"],
                    reporting(ctx, mirror, "rl step", rollout_steps(conf.rl, len(inputs["tasks"]))), rl=conf.rl,
                    trainer=conf.trainer, ckpt_path=conf.ckpt_path, select_tasks=inputs["select_tasks"])


def consolidation_inputs(c: dict, conf: TrainConf) -> dict:
    from .merge.run import merge_options
    from .merge.stream import check_merge
    from .opd.teachers import check_teachers

    cons, teachers = conf.consolidation, conf.teacher_pool.teachers
    check_teachers(teachers)
    experts = [t.checkpoint for t in teachers]
    if cons.name in MERGE_SCHEMAS:
        base = conf.teacher_pool.base
        if cons.name != "soup" and not (base and (Path(base) / "config.json").exists()):
            raise ValueError(f"teacher_pool.base={base} has no checkpoint; {cons.name} takes task vectors "
                             "against the SFT init: train sft/stage0 first or point teacher_pool.base at it")
        options = merge_options(cons)
        check_merge(cons.name, experts, base, options.pop("weights"), options)
    elif cons.student == "soup":
        check_merge("soup", experts, weights=cons.weights)
    tasks, eval_tasks = rl_task_sets(c["rl"])
    return {"teachers": teachers, "tasks": tasks, "eval_tasks": eval_tasks, "select_tasks": select_tasks(c["rl"])}


def consolidate(conf: TrainConf, inputs: dict, ctx: JobContext, mirror) -> dict:
    from .merge.run import merge_and_evaluate
    from .opd.run import resolve_student, train_opd
    from .rl.task_sampler import rollout_steps

    cons, pool = conf.consolidation, conf.teacher_pool
    if cons.name in MERGE_SCHEMAS:
        return merge_and_evaluate(cons, pool, inputs["eval_tasks"], conf.rl, ctx, trainer=conf.trainer)
    student = resolve_student(cons.student, inputs["teachers"], conf.runs_dir, ctx.out, cons.weights)
    return train_opd(student, pool, inputs["tasks"], inputs["eval_tasks"],
                     reporting(ctx, mirror, "opd step", rollout_steps(conf.rl, len(inputs["tasks"]))), opd=cons,
                     rl=conf.rl, trainer=conf.trainer, ckpt_path=conf.ckpt_path, select_tasks=inputs["select_tasks"])


def job_dtype(job: str, conf: TrainConf) -> str:
    """What the job loads its untrained models in (reference, teachers, engines, inference and evaluation
    copies; a trained policy keeps fp32 masters): model.dtype. SFT and merges read it only for their
    held-out evaluation, on a GPU (heldout.evaluation_dtype; float32 on the CPU), so stages, merges and
    the experts' inference copies are evaluated alike; SFT itself trains fp32 masters."""
    return conf.model.dtype


def auto_job(c: dict) -> str:
    if c["job"] != "auto":
        return c["job"]
    return "consolidation" if c["consolidation"]["name"] != "none" else "sft"


def job_label(job: str, c: dict) -> str:
    return f"consolidation={c['consolidation']['name']}" if job == "consolidation" else f"job={job}"


def container(cfg: DictConfig) -> dict:
    return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)


def default_config(job: str, c: dict) -> dict:
    """What the job's group path composes to with no other overrides: its identity's baseline."""
    groups = {"sft": ["sft_stage"], "rl": ["sft_stage", "rl_algo"], "consolidation": ["consolidation", "teacher_pool"]}
    return container(compose(config_name="train", overrides=[f"job={job}", f"runs_dir={c['runs_dir']}",
                                                             *(f"{g}={c[g]['name']}" for g in groups[job])]))


def checked_job(cfg: DictConfig, overrides: list[str]) -> tuple[dict, str]:
    """The composed config as plain data and the job it runs, refused as chorus.train refuses it: an
    unknown job, or a setting the job would not read (job_settings.check_settings). The sweep tools
    check their command lines through here too."""
    c = container(cfg)
    job = auto_job(c)
    if job not in JOBS:
        raise ValueError(f"unknown job {job!r}; choose one of {list(JOBS)}")
    check_settings(job, job_label(job, c), c, cfg, overrides)
    return c, job


def check_lightning(conf: TrainConf) -> None:
    """The trainer settings (trainer.extra and trainer.callbacks against Lightning, the fused optimizer
    against torch) and ckpt_path's file, before anything starts."""
    from .trainer_setup import check_trainer

    check_trainer(conf.trainer)
    if conf.ckpt_path and not Path(conf.ckpt_path).is_file():
        raise ValueError(f"ckpt_path={conf.ckpt_path} is not a file; give a Lightning checkpoint (e.g. "
                         "<run dir>/ckpt/last.ckpt)")


def resolve_pool(job: str, cfg: DictConfig, c: dict) -> dict:
    """With teacher_pool.from_runs, the pool's checkpoints as found there, set in `cfg` (and returned
    as the plain config): before the run's identity, which names them."""
    pool = c["teacher_pool"]
    if job != "consolidation" or not pool["from_runs"]:
        return c
    from .opd.teachers import pool_from_runs

    teachers, cfg.teacher_pool.base = pool_from_runs(pool["teachers"], pool["base"], c["runs_dir"], pool["from_runs"])
    for node, found in zip(cfg.teacher_pool.teachers, teachers):
        node.checkpoint = found["checkpoint"]
    return container(cfg)


def job_run_dir(c: dict, job: str) -> tuple[Path, dict]:
    """Where `job` writes under the composed config `c`, and the identity record it leaves there:
    <runs_dir>/sft/<stage>, rl/<algo>/<stage>, consolidation/<method>/<pool>, each with -<run_tag> and
    -<hash of the settings that differ from the groups' defaults> when there are any."""
    return run_dir(job, c, default_config(job, c))


def started_from(job: str, inputs: dict, conf: TrainConf) -> str | None:
    """The checkpoint a job starts from (SFT's init, RL's stage, the pool's first expert)."""
    if job == "consolidation":
        return inputs["teachers"][0].checkpoint
    return inputs.get("init") or (conf.sft_stage.checkpoint if job == "sft" else None)


def metadata(c: dict, job: str, start: str | None = None) -> dict:
    """summary.json's run metadata: only the groups that shaped this job are named. The model is the
    one the starting checkpoint descends from when a chorus run recorded it (model.* is not read by
    jobs that start from a checkpoint, so its default would misname them)."""
    model = checkpoint_model(start) or model_name(c["model"])
    return run_metadata(job, model, c["seed"],
                        sft_stage=c["sft_stage"]["name"] if job in ("sft", "rl") else None,
                        rl_algo=c["rl_algo"]["name"] if job == "rl" else None,
                        consolidation=c["consolidation"]["name"] if job == "consolidation" else None,
                        teacher_pool=c["teacher_pool"]["name"] if job == "consolidation" else None,
                        pass_coverage=c["pass_coverage"])


def rl_task_sets(r: dict, only: str | None = None) -> list[list]:
    """The training and held-out tasks of an on-policy job (or just `only`); none may be empty."""
    from .tasks import load_tasks

    sets = []
    for key in [only] if only else ["tasks", "eval_tasks"]:
        chosen = load_tasks(**{k: v for k, v in r[key].items() if v is not None})
        if not chosen:
            raise ValueError(f"rl.{key} selects no tasks; check its split, per_family, families and difficulty")
        sets.append(chosen)
    return sets


def select_tasks(r: dict) -> list | None:
    """rl.select_every's validation tasks: rl.eval_tasks' designs of the validation split (None when the
    run chooses no checkpoint)."""
    if not r["select_every"]:
        return None
    return rl_task_sets({"select": {**r["eval_tasks"], "split": "validation"}}, "select")[0]


JOBS = {"sft": (sft_inputs, sft), "rl": (rl_inputs, rl), "consolidation": (consolidation_inputs, consolidate)}


def planned_policy(job: str, c: dict, conf: TrainConf) -> str:
    """The checkpoint whose architecture a training job's memory plan is for: the one it trains."""
    from .sft.stages import resolve_init, stage_init_checkpoint

    if job == "sft":
        return conf.sft_stage.checkpoint or resolve_init(conf.sft_stage.init, c["model"], conf.runs_dir)
    if job == "rl":
        return stage_init_checkpoint(conf.sft_stage.name, conf.sft_stage.checkpoint, conf.runs_dir)
    return conf.teacher_pool.teachers[0].checkpoint  # OPD: the student has its teachers' architecture


def memory_plan(job: str, c: dict, conf: TrainConf, policy: str | None = None) -> str | None:
    """The per-device memory plan of a training job as text, for GPU jobs and plan_only=true (None
    otherwise, and for merges); RL and OPD with rl.micro_batch=null (auto) have theirs sized by it on
    every device (a CPU's is its memory). `policy`: a checkpoint of the trained one's architecture
    (default: planned_policy). Raises one line when it does not fit (after printing the plan under
    plan_only)."""
    import torch

    from . import memory_plan as mp
    from .trainer_setup import eval_device

    cuda = eval_device(conf.trainer).type == "cuda"
    merge = job == "consolidation" and conf.consolidation.name != "opd"
    if merge or not (conf.plan_only or cuda or mp.sizes_micro_batch(job, conf.rl)):
        return None
    policy = policy or planned_policy(job, c, conf)
    device = conf.plan_device_gib
    if device is None and cuda:
        if not torch.cuda.is_available():
            raise ValueError("a memory plan without a GPU needs the device's size: plan_device_gib=<GiB>")
        device = mp.cuda_total_gib(eval_device(conf.trainer))
    gpu = cuda or conf.plan_only  # plan_only plans the job as it runs on a GPU
    try:
        _, text = mp.plan_training(job, conf, policy, device or mp.host_gib(), gpu, job_label(job, c))
    except mp.PlanRefused as exc:
        if conf.plan_only:  # the whole plan, then the refusal
            print(exc.text)
        raise
    return text if gpu else None


@hydra.main(config_path=str(CONF_DIR), config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> None:
    primary = process_rank() == 0  # under DDP every rank runs this job; one writes the run's records
    with entry_point("chorus.train") as entry:
        c, job = checked_job(cfg, entry.overrides)
        c = resolve_pool(job, cfg, c)
        conf: TrainConf = OmegaConf.to_object(cfg)  # the library's typed view of the same settings
        check_lightning(conf)
        if (text := memory_plan(job, c, conf)) and primary:
            print(text, file=sys.stderr if not conf.plan_only else sys.stdout)
        if conf.plan_only:
            return
        fmt = c["format"]["name"]
        get_format(fmt)
        sim, workers = sim_config(c["simulator"])
        out, record = job_run_dir(c, job)
        drift = check_reuse(out, record)
        if drift and primary:  # the same run by its settings; the defaults it was made under have moved
            print(f"chorus.train: note: {out} was made when {len(drift)} default(s) differed ({drift[0]}"
                  f"{'; ...' if len(drift) > 1 else ''}); its own settings match", file=sys.stderr)
        if has_results(out, job):  # the same settings, finished: never trained (or logged) twice
            if primary:
                print(f"chorus.train: {out} already holds this run, finished with these settings; nothing to do "
                      "(move the dir away, or set run_tag=, to train it again)", file=sys.stderr)
                summary = out / "summary.json"
                print(json.dumps({**(json.loads(summary.read_text()) if summary.exists() else {}), "skipped": "done"}))
            return
        prepare, run = JOBS[job]
        inputs = prepare(c, conf)
        executor = make_executor(sim, workers)  # one per job, handed to every phase that simulates
        ctx = JobContext(out, fmt, sim, workers=workers, executor=executor, seed=conf.seed,
                         dtype=job_dtype(job, conf), meta=metadata(c, job, started_from(job, inputs, conf)),
                         progress=Progress(out))
        if primary:
            write_record(out, {**record, "overrides": entry.overrides})
            copy_hydra_config(entry.out_dir, out)
        logger = c["logger"] if primary else {"name": "none"}  # logger=none: a mirror that logs nothing
        with open_mirror(logger, c, out, name=str(out.relative_to(c["runs_dir"])), job_type=job,
                         group=wandb_group(c["runs_dir"]), meta=ctx.meta) as mirror:
            with executor:
                info = run(conf, inputs, ctx, mirror)
            mirror.log_result(out)
    if primary:
        print(json.dumps(info))


if __name__ == "__main__":
    main()
