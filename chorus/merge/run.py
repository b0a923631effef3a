"""Merge a teacher pool into one checkpoint and evaluate it like any run."""
from __future__ import annotations

import json
from pathlib import Path

from ..policy.engines import HFEngine, SamplingParams
from ..policy.models import load_model
from ..rl.run import evaluate_policy
from ..sim import SimConfig
from .stream import merge_checkpoints


def merge_and_evaluate(method: str, experts: list[str], base: str | None, out_dir: str | Path, options: dict,
                       eval_tasks, fmt: str, sim: SimConfig, eval_samples: int, params: SamplingParams,
                       workers: int | None = None, max_prompt_tokens: int = 3072, meta: dict | None = None) -> dict:
    out = Path(out_dir)
    info = merge_checkpoints(method, experts, out / "hf", base=base, **options)
    model, tok = load_model("hf", path=info["checkpoint"])
    summary = evaluate_policy(HFEngine(model, tok), tok, eval_tasks, fmt, eval_samples, params, sim, out, workers,
                              max_prompt_tokens)
    summary.update({**(meta or {}), **info})
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
