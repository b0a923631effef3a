"""python -m chorus.train job=sft sft_stage=<stage0|stage1|stage2> [sft_stage.checkpoint=<path|id>]
python -m chorus.train job=rl sft_stage=<stage> rl_algo=<dapo|grpo|dr_grpo> [trainer=cpu|gpu|ddp|fsdp]

job=sft trains (or registers) one SFT stage; its Hugging Face checkpoint lands in
<runs_dir>/sft/<stage>/hf, where the next stage and the RL jobs find it.
job=rl turns a stage checkpoint into an expert in <runs_dir>/rl/<rl_algo>/<stage>/ (hf/ + per-task
held-out table); it resumes from that dir's last checkpoint unless rl.resume=false.
consolidation=<method> teacher_pool=<pool> merges the pool's experts or distils them (opd) into
<runs_dir>/consolidation/<method>/<pool>/, evaluated on the held-out tasks.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from .config_schema import CONF_DIR, register_configs
from .sim.config import sim_config
from .stimulus.formats import get_format
from .tasks import TaskFormatError

register_configs()


def sft(c: dict, fmt: str, sim, workers) -> dict:
    from .sft.stages import run_stage

    return run_stage(c["sft_stage"], c["model"], fmt, sim, c["runs_dir"], seed=c["seed"], workers=workers)


def rl(c: dict, fmt: str, sim, workers) -> dict:
    from .rl.algos import get_algo
    from .rl.run import train_rl
    from .sft.stages import stage_init_checkpoint

    stage, algo_cfg = c["sft_stage"], dict(c["rl_algo"])
    algo = get_algo(algo_cfg.pop("name"), **algo_cfg)
    init = stage_init_checkpoint(stage, c["runs_dir"])
    tasks, eval_tasks = rl_task_sets(c["rl"])
    out = Path(c["runs_dir"]) / "rl" / algo.name / stage["name"]
    meta = {"job": "rl", "sft_stage": stage["name"], "rl_algo": algo.name, "seed": c["seed"]}
    return train_rl(init, out, algo, c["rl"], tasks, eval_tasks, fmt, sim, c["trainer"], workers=workers,
                    seed=c["seed"], dtype=c["model"]["dtype"], meta=meta)


def consolidate(c: dict, fmt: str, sim, workers) -> dict:
    from .merge.methods import MERGES
    from .merge.run import merge_and_evaluate
    from .opd.run import resolve_student, train_opd
    from .opd.teachers import Teacher, check_teachers
    from .policy.engines import SamplingParams

    cons, pool, r = c["consolidation"], c["teacher_pool"], c["rl"]
    method = cons["name"]
    teachers = [Teacher(**t) for t in pool["teachers"]]
    check_teachers(teachers)
    out = Path(c["runs_dir"]) / "consolidation" / method / pool["name"]
    tasks, eval_tasks = rl_task_sets(r)
    meta = {"job": "consolidation", "consolidation": method, "teacher_pool": pool["name"], "seed": c["seed"]}
    params = SamplingParams(max_new_tokens=r["max_new_tokens"], temperature=r["temperature"], seed=c["seed"] + 1)
    if method in MERGES:
        options = {"weights": cons["weights"], "seed": cons["seed"]}
        options.update({k: cons[k] for k in MERGE_OPTIONS.get(method, ())})
        return merge_and_evaluate(method, [t.checkpoint for t in teachers], pool["base"], out, options, eval_tasks,
                                  fmt, sim, r["eval_samples"], params, workers, r["max_prompt_tokens"], meta)
    if method != "opd":
        raise ValueError(f"unknown consolidation {method!r}; choose one of {sorted([*MERGES, 'opd'])}")
    student = resolve_student(cons["student"], teachers, c["runs_dir"], out, cons["weights"])
    return train_opd(student, out, teachers, cons, r, tasks, eval_tasks, fmt, sim, c["trainer"], pool["missing"],
                     pool["online_samples"], workers, c["seed"], c["model"]["dtype"], meta)


MERGE_OPTIONS = {"task_arithmetic": ("lam",), "ties": ("density", "lam"), "dare": ("density", "lam"),
                 "della": ("density", "epsilon", "lam")}


def auto_job(c: dict) -> str:
    if c["job"] != "auto":
        return c["job"]
    return "consolidation" if c["consolidation"]["name"] != "none" else "sft"


def rl_task_sets(r: dict) -> tuple[list, list]:
    """The training and held-out tasks of an on-policy job; neither may be empty."""
    from .tasks import load_tasks

    sets = []
    for key in ("tasks", "eval_tasks"):
        chosen = load_tasks(**{k: v for k, v in r[key].items() if v is not None})
        if not chosen:
            raise ValueError(f"rl.{key} selects no tasks; check its split, per_family, families and difficulty")
        sets.append(chosen)
    return sets[0], sets[1]


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
        info = JOBS[job](c, fmt, sim, workers)
    except (TaskFormatError, ValueError, OSError) as exc:
        print(f"chorus.train: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
