"""python -m chorus.train job=sft sft_stage=<stage0|stage1|stage2> [sft_stage.checkpoint=<path|id>]

Trains (or registers) one SFT stage; the stage's Hugging Face checkpoint lands in
<runs_dir>/sft/<stage>/hf, where the next stage and the RL jobs find it.
"""
from __future__ import annotations

import json
import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from .config_schema import CONF_DIR, register_configs
from .sft.stages import run_stage
from .sim.config import sim_config
from .stimulus.formats import get_format
from .tasks import TaskFormatError

register_configs()
JOBS = ("sft",)


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
        info = run_stage(c["sft_stage"], c["model"], fmt, sim, c["runs_dir"], seed=c["seed"], workers=workers)
    except (TaskFormatError, ValueError, OSError) as exc:
        print(f"chorus.train: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
