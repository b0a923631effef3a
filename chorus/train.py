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
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from .config_schema import CONF_DIR, register_configs
from .sim.config import sim_config
from .stimulus.formats import get_format
from .tasks import TaskFormatError
from .tracking.record import copy_hydra_config, model_name, run_metadata
from .tracking.wandb_mirror import open_mirror

register_configs()


def sft(c: dict, out: Path, fmt: str, sim, workers, mirror) -> dict:
    from .rl.run import eval_sampling, evaluate_checkpoint
    from .sft.stages import run_stage

    stage, r = c["sft_stage"], c["rl"]
    info = run_stage(stage, c["model"], fmt, sim, c["runs_dir"], seed=c["seed"], workers=workers,
                     on_step=mirror.log_step)
    if stage["evaluate"]:  # the stage on the experts' held-out tasks, so stages and experts compare
        summary = evaluate_checkpoint(info["checkpoint"], rl_task_sets(r, only="eval_tasks")[0], fmt,
                                      r["eval_samples"], eval_sampling(r, c["seed"]), sim, out, workers,
                                      r["max_prompt_tokens"], meta={**metadata(c, "sft"), **info},
                                      dtype=c["model"]["dtype"])
        info.update(pass_rate=summary["pass_rate"], mean_overall=summary["mean_overall"])
    return info


def rl(c: dict, out: Path, fmt: str, sim, workers, mirror) -> dict:
    from .rl.algos import get_algo
    from .rl.run import train_rl
    from .sft.stages import stage_init_checkpoint

    stage, algo_cfg = c["sft_stage"], dict(c["rl_algo"])
    algo = get_algo(algo_cfg.pop("name"), **algo_cfg)
    init = stage_init_checkpoint(stage, c["runs_dir"])
    tasks, eval_tasks = rl_task_sets(c["rl"])
    return train_rl(init, out, algo, c["rl"], tasks, eval_tasks, fmt, sim, c["trainer"], workers=workers,
                    seed=c["seed"], dtype=c["model"]["dtype"], meta=metadata(c, "rl"), log_step=mirror.log_step)


def consolidate(c: dict, out: Path, fmt: str, sim, workers, mirror) -> dict:
    from .merge.methods import MERGES
    from .merge.run import merge_and_evaluate
    from .opd.run import resolve_student, train_opd
    from .opd.teachers import Teacher, check_teachers
    from .rl.run import eval_sampling

    cons, pool, r = c["consolidation"], c["teacher_pool"], c["rl"]
    method = cons["name"]
    teachers = [Teacher(**t) for t in pool["teachers"]]
    check_teachers(teachers)
    tasks, eval_tasks = rl_task_sets(r)
    meta = metadata(c, "consolidation")
    params = eval_sampling(r, c["seed"])
    if method in MERGES:
        options = {"weights": cons["weights"], "seed": cons["seed"]}
        options.update({k: cons[k] for k in MERGE_OPTIONS.get(method, ())})
        return merge_and_evaluate(method, [t.checkpoint for t in teachers], pool["base"], out, options, eval_tasks,
                                  fmt, sim, r["eval_samples"], params, workers, r["max_prompt_tokens"], meta)
    if method != "opd":
        raise ValueError(f"unknown consolidation {method!r}; choose one of {sorted([*MERGES, 'opd'])}")
    student = resolve_student(cons["student"], teachers, c["runs_dir"], out, cons["weights"])
    return train_opd(student, out, teachers, cons, r, tasks, eval_tasks, fmt, sim, c["trainer"], pool["missing"],
                     pool["online_samples"], workers, c["seed"], c["model"]["dtype"], meta, log_step=mirror.log_step)


MERGE_OPTIONS = {"task_arithmetic": ("lam",), "ties": ("density", "lam"), "dare": ("density", "lam"),
                 "della": ("density", "epsilon", "lam")}


def auto_job(c: dict) -> str:
    if c["job"] != "auto":
        return c["job"]
    return "consolidation" if c["consolidation"]["name"] != "none" else "sft"


def run_dir(c: dict, job: str) -> Path:
    """Where a job writes: <runs_dir>/sft/<stage>, rl/<algo>/<stage>[-tag], consolidation/<method>/<pool>[-tag]."""
    tag = f"-{c['run_tag']}" if c["run_tag"] else ""
    if job == "sft":
        from .sft.stages import stage_dir

        return stage_dir(c["runs_dir"], c["sft_stage"]["name"])
    if job == "rl":
        return Path(c["runs_dir"]) / "rl" / c["rl_algo"]["name"] / (c["sft_stage"]["name"] + tag)
    return Path(c["runs_dir"]) / "consolidation" / c["consolidation"]["name"] / (c["teacher_pool"]["name"] + tag)


def metadata(c: dict, job: str) -> dict:
    """summary.json's run metadata: only the groups that shaped this job are named."""
    return run_metadata(job, model_name(c["model"]), c["seed"],
                        sft_stage=c["sft_stage"]["name"] if job in ("sft", "rl") else None,
                        rl_algo=c["rl_algo"]["name"] if job == "rl" else None,
                        consolidation=c["consolidation"]["name"] if job == "consolidation" else None,
                        teacher_pool=c["teacher_pool"]["name"] if job == "consolidation" else None)


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


JOBS = {"sft": sft, "rl": rl, "consolidation": consolidate}


@hydra.main(config_path=str(CONF_DIR), config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> None:
    c = OmegaConf.to_container(cfg, resolve=True)
    try:
        job = auto_job(c)
        if job not in JOBS:
            raise ValueError(f"unknown job {job!r}; choose one of {list(JOBS)}")
        fmt_options = dict(c["format"])
        fmt = fmt_options.pop("name")
        get_format(fmt)
        sim, workers = sim_config(c["simulator"])
        out = run_dir(c, job)
        out.mkdir(parents=True, exist_ok=True)
        copy_hydra_config(HydraConfig.get().runtime.output_dir, out)
        with open_mirror(c["logger"], c, out, name=str(out.relative_to(c["runs_dir"])), job_type=job) as mirror:
            info = JOBS[job](c, out, fmt, sim, workers, mirror)
            mirror.log_result(out)
    except (TaskFormatError, ValueError, OSError) as exc:
        print(f"chorus.train: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
