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
import secrets
import string
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

from .identity import flatten
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
    timing = flatten(summary.get("timing") or {}, "timing/", sep="/")
    rest = {k: v for k, v in summary.items() if k not in META_KEYS and k != "timing"}
    return {**meta, **timing, **flatten(rest, "eval/", sep="/")}


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


def wandb_group(runs_dir: str | Path) -> str:
    """A runs dir as a W&B group: runs/pipeline/staged/seed0 (relative to the working dir when under
    it, so that the same pipeline run from its checkout groups alike on every machine)."""
    path = Path(runs_dir).absolute()
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


RUN_ID_FILE = "wandb-run-id"  # the W&B run of a run dir: a resumed or re-run job logs into the same one


def run_id(run_dir: Path) -> str:
    """The run dir's W&B run id, made on its first run and kept in the dir."""
    path = Path(run_dir) / RUN_ID_FILE
    try:
        known = path.read_text().strip()
    except OSError:
        known = ""
    if known:
        return known
    new = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))  # W&B's id form
    path.write_text(new + "\n")
    return new


def run_tags(meta: dict, extra: list[str] | None = None) -> list[str]:
    """What a run is, as W&B tags: its job, groups and model (job=rl, rl_algo=dapo, sft_stage=stage1,
    model=tiny-xs, ...), then logger.tags."""
    keys = ("job", "sft_stage", "rl_algo", "consolidation", "teacher_pool", "policy", "model")
    return [f"{k}={meta[k]}" for k in keys if meta.get(k) is not None][:20] + list(extra or [])


@contextmanager
def open_mirror(logger: dict, config: dict, run_dir: str | Path, name: str, job_type: str,
                group: str | None = None, meta: dict | None = None):
    """Yield a Mirror for one run; the W&B run is always finished, also when the job fails. One W&B run
    per run dir (its id kept there); grouped by logger.group, else `group` (the runs dir: a pipeline's
    preset and seed), tagged with what the run is (run_tags)."""
    if logger["name"] == "none":
        yield Mirror()
        return
    if logger["name"] != "wandb":
        raise ValueError(f"unknown logger {logger['name']!r}; choose wandb or none")
    import wandb

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    run = wandb.init(project=logger["project"], entity=logger["entity"], group=logger["group"] or group,
                     tags=run_tags(meta or {}, logger["tags"]), mode=resolve_mode(logger["mode"]), dir=str(run_dir),
                     config=config, name=name, job_type=job_type, id=run_id(run_dir), resume="allow")
    exit_code = 1
    try:
        yield WandbMirror(run)
        exit_code = 0
    finally:
        run.finish(exit_code=exit_code)
