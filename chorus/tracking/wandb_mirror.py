"""A copy of a run dir's results in Weights & Biases: offline by default, online only when a mode
and an API key say so. The run dir's files stay the source of truth.

Metric names, as W&B shows them: training steps log under `train/` (train/reward_mean, train/loss,
...), the held-out evaluation in summary.json goes to the run summary under `eval/` (eval/pass_rate,
eval/pass_at_k/5, ...), its timing under `timing/`, and the run's metadata (job, model, seed, ...)
unprefixed. The prefixes keep a training batch's numbers from ever taking the held-out result's
place: W&B writes a run's last history row at finish, after the summary, and a shared name
(pass_rate) would have let a training batch's value stand as the run's result."""
from __future__ import annotations

import json
import logging
import netrc
import os
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

from .record import META_KEYS
from .run_dir import SUMMARY, read_table

log = logging.getLogger("chorus.tracking")
MODES = ("offline", "online", "disabled")


class Mirror:
    """What a job sees of the logger; this one logs nothing (logger=none)."""

    def log_step(self, step: int, scalars: dict) -> None:
        pass

    def log_result(self, run_dir: str | Path) -> None:
        pass


class WandbMirror(Mirror):
    def __init__(self, run):
        self.run = run

    def log_step(self, step: int, scalars: dict) -> None:
        self.run.log({f"train/{k}": v for k, v in scalars.items() if _is_scalar(v)}, step=step)

    def log_result(self, run_dir: str | Path) -> None:
        import wandb

        run_dir = Path(run_dir)
        if (run_dir / SUMMARY).exists():
            summary = json.loads((run_dir / SUMMARY).read_text())
            self.run.summary.update({k: v for k, v in summary_entries(summary).items() if _is_scalar(v)})
        table = per_task_frame(run_dir)
        if table is not None:
            self.run.log({"per_task": wandb.Table(dataframe=table)})


def per_task_frame(run_dir: Path):
    """The run's per-task rows with nested cells flattened (metrics.block, ...) for a wandb.Table."""
    try:
        df = read_table(run_dir)
    except (FileNotFoundError, ValueError):
        return None
    if "metrics" in df:
        metrics = [m if isinstance(m, dict) else {} for m in df.pop("metrics")]
        for key in sorted({k for m in metrics for k in m}):
            df[f"metrics.{key}"] = [m.get(key) for m in metrics]
    for col in df.columns:
        if df[col].map(lambda v: isinstance(v, (dict, list, tuple))).any():
            df[col] = df[col].map(lambda v: json.dumps(v, default=str) if isinstance(v, (dict, list, tuple)) else v)
    return df


def summary_entries(summary: dict) -> dict:
    """summary.json as W&B summary keys: metadata as is, timing under timing/, the rest under eval/."""
    meta = {k: v for k, v in summary.items() if k in META_KEYS}
    timing = flatten(summary.get("timing") or {}, "timing/")
    rest = {k: v for k, v in summary.items() if k not in META_KEYS and k != "timing"}
    return {**meta, **timing, **flatten(rest, "eval/")}


def flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "/"))
        else:
            out[key] = v
    return out


def _is_scalar(v) -> bool:
    return isinstance(v, (int, float, str, bool)) or v is None


def has_api_key() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
    try:
        return netrc.netrc().authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def resolve_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"logger.mode={mode!r} is not a W&B mode; choose one of {list(MODES)}")
    if mode == "online" and not has_api_key():
        log.warning("logger.mode=online but no W&B API key (WANDB_API_KEY or `wandb login`); logging offline")
        return "offline"
    return mode


@contextmanager
def open_mirror(logger: dict, config: dict, run_dir: str | Path, name: str, job_type: str):
    """Yield a Mirror for one run; the W&B run is always finished, also when the job fails."""
    if logger["name"] == "none":
        yield Mirror()
        return
    if logger["name"] != "wandb":
        raise ValueError(f"unknown logger {logger['name']!r}; choose wandb or none")
    import wandb

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    run = wandb.init(project=logger["project"], entity=logger["entity"], group=logger["group"],
                     tags=list(logger["tags"] or []), mode=resolve_mode(logger["mode"]), dir=str(run_dir),
                     config=config, name=name, job_type=job_type)
    exit_code = 1
    try:
        yield WandbMirror(run)
        exit_code = 0
    finally:
        run.finish(exit_code=exit_code)
