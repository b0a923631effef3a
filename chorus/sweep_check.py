"""python -m chorus.sweep_check sweeps/*.yaml

Expands every combination of a W&B sweep's values exactly as the W&B agent formats them
(wandb's own create_sweep_command_args), and composes each command line as Hydra overrides of
chorus.train. Prints one line per problem and exits 1 if there is any.
"""
from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import yaml
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from .train import checked_job
from .config.schema import CONF_DIR, register_configs

HEAD = ["${env}", "${interpreter}", "-m", "chorus.train"]


def parameter_values(spec: dict) -> list:
    if "values" in spec:
        return list(spec["values"])
    if "value" in spec:
        return [spec["value"]]
    if "min" in spec and "max" in spec:  # a distribution: its two ends stand for the range
        return [spec["min"], spec["max"]]
    raise ValueError(f"parameter has no values, value or min/max: {spec}")


def command_lines(sweep: dict) -> list[list[str]]:
    """The argv after `-m chorus.train` for every combination, as the agent builds it."""
    from wandb.sdk.launch.sweeps.utils import create_sweep_command_args

    names = list(sweep.get("parameters", {}))
    grids = [parameter_values(sweep["parameters"][n]) for n in names]
    lines = []
    for combo in itertools.product(*grids):
        args = create_sweep_command_args({"args": {n: {"value": v} for n, v in zip(names, combo)}})
        line = []
        for chunk in sweep["command"][len(HEAD):]:
            line += args[chunk[2:-1]] if chunk.startswith("${") and chunk.endswith("}") and chunk[2:-1] in args \
                else [str(chunk)]
        lines.append(line)
    return lines


def check_sweep(path: str | Path, run_id: str = "sweeprun1") -> list[str]:
    """Problems with one sweep file; empty when every combination composes."""
    sweep = yaml.safe_load(Path(path).read_text())
    name = Path(path).name
    if [str(c) for c in sweep.get("command", [])[:len(HEAD)]] != HEAD or \
            sweep["command"][-1] != "${args_no_hyphens}":
        return [f"{name}: command must be {HEAD + ['...', '${args_no_hyphens}']}"]
    metric = (sweep.get("metric") or {}).get("name", "")
    if not metric.startswith("eval/"):
        return [f"{name}: metric.name={metric!r} is not a held-out result; optimise an eval/ metric (e.g. "
                "eval/pass_rate): train/... are training batches"]
    register_configs()
    problems: dict[str, str] = {}  # one line per distinct problem, with the first command line showing it
    os.environ.setdefault("WANDB_RUN_ID", run_id)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        for line in command_lines(sweep):
            bad = [a for a in line if a.partition("=")[2] == "None"]
            if bad:
                problems.setdefault(f"{bad[0]} is not a Hydra value; write the string \"null\" in the sweep", "")
                continue
            try:
                cfg, _ = checked_job(compose(config_name="train", overrides=line), line)  # what chorus.train refuses
            except (HydraException, OmegaConfBaseException, ValueError) as exc:
                problems.setdefault(str(exc).splitlines()[0], f" (in: {' '.join(line)})")
                continue
            clashes = [p for p in sweep.get("parameters", {}) if p in cfg]
            if clashes:
                problems.setdefault(f"parameter {clashes[0]!r} is a config key; W&B would lock it and drop the "
                                    "nested config; sweep its fields (e.g. consolidation.density) or a preset", "")
    return [f"{name}: {p}{where}" for p, where in problems.items()]


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m chorus.sweep_check sweeps/*.yaml", file=sys.stderr)
        return 2
    problems = [p for path in argv for p in check_sweep(path)]
    for p in problems:
        print(f"chorus.sweep_check: {p}", file=sys.stderr)
    if not problems:
        print(f"{len(argv)} sweep file(s): every combination composes")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
