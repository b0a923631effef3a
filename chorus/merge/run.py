"""Merge a teacher pool into one checkpoint and evaluate it like any run."""
from __future__ import annotations

from pathlib import Path

from ..policy.engines import SamplingParams
from ..rl.run import evaluate_checkpoint
from ..sim import SimConfig
from .stream import merge_checkpoints


def merge_and_evaluate(method: str, experts: list[str], base: str | None, out_dir: str | Path, options: dict,
                       eval_tasks, fmt: str, sim: SimConfig, eval_samples: int, params: SamplingParams,
                       workers: int | None = None, max_prompt_tokens: int = 3072, meta: dict | None = None) -> dict:
    out = Path(out_dir)
    info = merge_checkpoints(method, experts, out / "hf", base=base, **options)
    return evaluate_checkpoint(info["checkpoint"], eval_tasks, fmt, eval_samples, params, sim, out, workers,
                               max_prompt_tokens, meta={**(meta or {}), **info})
