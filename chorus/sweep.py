"""python -m chorus.sweep sweeps/<name>.yaml [count=N] [seed=S] [<chorus.train override> ...]

Runs a W&B sweep file without W&B's sweep server (no account): `method: grid` runs every combination,
`method: random` draws `count` of them (distributions: uniform between min and max); `bayes` needs
the server's model of past runs, so it is refused. Each combination is formatted exactly as the W&B
agent formats it (chorus.sweep_check) and run as `python -m chorus.train <its line> <overrides>`, one
after another; the extra overrides reach every run (e.g. teacher_pool.from_runs=<a pipeline's runs
dir> to merge its experts). Every combination is composed and checked before the first one starts.
Ends with the sweep's metric for each run, best first; exits 1 when a run failed.

The same file runs online, unchanged: `wandb sweep sweeps/<name>.yaml && wandb agent <sweep id>`.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import yaml

from .sweep_check import HEAD, check_sweep, command_lines

METHODS = ("grid", "random")


def planned_lines(sweep: dict, count: int | None, seed: int) -> list[list[str]]:
    """The chorus.train argv of each run the sweep makes offline."""
    method = sweep.get("method", "grid")
    if method not in METHODS:
        raise ValueError(f"method: {method} needs W&B's sweep server (wandb sweep, with an account); offline, "
                         f"use one of {list(METHODS)}")
    if method == "grid":
        lines = command_lines(sweep)
        return lines[:count] if count else lines
    if not count:
        raise ValueError("method: random draws runs until stopped; say how many with count=<N>")
    rng = random.Random(seed)
    drawn = []
    for _ in range(count):
        values = {}
        for name, spec in sweep.get("parameters", {}).items():
            if "values" in spec:
                values[name] = {"value": rng.choice(spec["values"])}
            elif "value" in spec:
                values[name] = {"value": spec["value"]}
            else:
                lo, hi = spec["min"], spec["max"]
                values[name] = {"value": rng.randint(lo, hi) if isinstance(lo, int) and isinstance(hi, int)
                                else rng.uniform(lo, hi)}
        drawn += command_lines({**sweep, "parameters": {k: {"value": v["value"]} for k, v in values.items()}})
    return drawn


def run_dir_of(line: list[str]) -> Path:
    """Where chorus.train will write this run, composed and checked as the job does it."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from .config.schema import CONF_DIR, register_configs
    from .train import checked_job, job_run_dir, resolve_pool

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        try:
            node = compose(config_name="train", overrides=line)
            c, job = checked_job(node, line)
            c = resolve_pool(job, node, c)
        except (HydraException, OmegaConfBaseException) as exc:
            raise ValueError(f"{str(exc).splitlines()[0]} (in: {' '.join(line)})") from exc
        return job_run_dir(c, job)[0]


def run_sweep(path: Path, extra: list[str], count: int | None = None, seed: int = 0) -> list[dict]:
    """Run the sweep's jobs one by one; returns one record per run (overrides, run_dir, status and the
    sweep's metric), best first."""
    sweep = yaml.safe_load(path.read_text())
    metric, goal = (sweep.get("metric") or {}).get("name", ""), (sweep.get("metric") or {}).get("goal", "maximize")
    os.environ.pop("WANDB_RUN_ID", None)  # runs are tagged run_tag=local (the sweeps' ${oc.env:WANDB_RUN_ID,local})
    problems = check_sweep(path)
    os.environ.pop("WANDB_RUN_ID", None)  # check_sweep's stand-in id
    if problems:
        raise ValueError(problems[0])
    lines = [line + extra for line in planned_lines(sweep, count, seed)]
    dirs = [run_dir_of(line) for line in lines]  # every run composes before the first starts
    records = []
    for i, (line, out) in enumerate(zip(lines, dirs), 1):
        print(f"chorus.sweep: run {i}/{len(lines)}: {' '.join(line)}", file=sys.stderr, flush=True)
        done = subprocess.run([sys.executable, *HEAD[2:], *line], stdout=sys.stderr)  # stdout: the table
        records.append({"overrides": line, "run_dir": str(out), "metric": _metric(out, metric),
                        "status": "done" if done.returncode == 0 else f"failed (exit {done.returncode})"})
    sign = -1 if goal == "maximize" else 1
    return sorted(records, key=lambda r: (r["metric"] is None, sign * (r["metric"] or 0)))


def _metric(run_dir: Path, metric: str):
    """An eval/ metric from the run's summary.json (eval/pass_at_k/5 -> summary["pass_at_k"]["5"])."""
    try:
        value = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    for key in metric.removeprefix("eval/").split("/"):
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def main(argv: list[str]) -> int:
    if not argv or not argv[0].endswith((".yaml", ".yml")):
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    options = {"count": None, "seed": "0"}
    extra = []
    for a in argv[1:]:
        key, _, value = a.partition("=")
        if key in options:
            options[key] = value
        else:
            extra.append(a)
    try:
        records = run_sweep(Path(argv[0]), extra, int(options["count"]) if options["count"] else None,
                            int(options["seed"]))
    except (ValueError, OSError) as exc:
        print(f"chorus.sweep: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    metric = (yaml.safe_load(Path(argv[0]).read_text()).get("metric") or {}).get("name")
    for r in records:
        shown = "-" if r["metric"] is None else f"{r['metric']:.4g}"
        print(f"{metric}={shown}  {r['status']}  {r['run_dir']}")
    return 1 if any(r["status"] != "done" for r in records) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
