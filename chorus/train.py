"""python -m chorus.train job=sft sft_stage=<stage0|stage1|stage2> [sft_stage.checkpoint=<path|id>]
python -m chorus.train job=rl sft_stage=<stage> rl_algo=<dapo|grpo|dr_grpo> [trainer=cpu|gpu|ddp|fsdp]

job=sft trains (or registers) one SFT stage; its Hugging Face checkpoint lands in
<runs_dir>/sft/<stage>/hf, where the next stage and the RL jobs find it.
job=rl turns a stage checkpoint into an expert in <runs_dir>/rl/<rl_algo>/<stage>/ (hf/ + per-task
held-out table); it resumes from that dir's last checkpoint unless rl.resume=false.
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
    from .tasks import load_tasks

    stage, algo_cfg = c["sft_stage"], dict(c["rl_algo"])
    algo = get_algo(algo_cfg.pop("name"), **algo_cfg)
    init = stage_init_checkpoint(stage, c["runs_dir"])
    tasks = load_tasks(**{k: v for k, v in c["rl"]["tasks"].items() if v is not None})
    eval_tasks = load_tasks(**{k: v for k, v in c["rl"]["eval_tasks"].items() if v is not None})
    out = Path(c["runs_dir"]) / "rl" / algo.name / stage["name"]
    meta = {"job": "rl", "sft_stage": stage["name"], "rl_algo": algo.name, "seed": c["seed"]}
    return train_rl(init, out, algo, c["rl"], tasks, eval_tasks, fmt, sim, c["trainer"], workers=workers,
                    seed=c["seed"], dtype=c["model"]["dtype"], meta=meta)


JOBS = {"sft": sft, "rl": rl}


@hydra.main(config_path=str(CONF_DIR), config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> None:
    c = OmegaConf.to_container(cfg, resolve=True)
    try:
        if c["job"] not in JOBS:
            raise ValueError(f"unknown job {c['job']!r}; choose one of {list(JOBS)}")
        fmt_options = dict(c["format"])
        fmt = fmt_options.pop("name")
        get_format(fmt)
        sim, workers = sim_config(c["simulator"])
        info = JOBS[c["job"]](c, fmt, sim, workers)
    except (TaskFormatError, ValueError, OSError) as exc:
        print(f"chorus.train: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
