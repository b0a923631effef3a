"""Held-out evaluation: sample a policy on the held-out tasks, score the samples in the simulator,
and write the per-task table and summary.json. The RL and OPD final (and periodic) evaluations,
SFT stages and merges all go through here, so every row of a table is computed alike."""
from __future__ import annotations

from pathlib import Path

import torch

from .config.job_context import JobContext
from .config.schema import RLConf, TrainerConf
from .policy.engines import SamplingParams, make_engine
from .policy.models import load_model
from .protocol.direct import run_direct
from .tracking.run_dir import write_run
from .tracking.summary import summarize
from .tracking.timing import rounded
from .trainer_setup import eval_device, evaluation_precision


def evaluate_policy(engine, tokenizer, tasks, rl: RLConf, ctx: JobContext, *, out_dir: Path | None = None,
                    meta: dict | None = None, phase: str = "held-out evaluation") -> dict:
    """Sample and score the held-out tasks as rl.eval_* says into out_dir (default: the run dir):
    per_task + summary.json (scores and `meta`) under the job's pass rule (ctx.meta's pass_coverage),
    the periodic step-N evaluations included."""
    n_samples = rl.eval_samples
    ctx.progress.start(phase, len(tasks) * n_samples)
    rows = run_direct(tasks, engine, tokenizer, ctx.fmt, n_samples, eval_sampling(rl, ctx.seed), ctx.sim,
                      workers=ctx.workers, executor=ctx.executor, max_prompt_tokens=rl.max_prompt_tokens,
                      batch_tasks=rl.prompts_per_generate, timing=ctx.timing,
                      progress=False, on_progress=ctx.progress.callback(phase))
    summary = {**summarize(rows, ctx.meta.get("pass_coverage")), "format": ctx.fmt, "policy": "model",
               **(meta or {}), "timing": rounded(ctx.timing)}
    write_run(ctx.out if out_dir is None else out_dir, rows, summary)
    return summary


def eval_sampling(rl: RLConf, seed: int) -> SamplingParams:
    """How held-out evaluations sample: rl.eval_temperature (default: the training temperature)."""
    temperature = rl.temperature if rl.eval_temperature is None else rl.eval_temperature
    return SamplingParams(max_new_tokens=rl.max_new_tokens, temperature=temperature, seed=seed + 1)


def evaluation_dtype(model_dtype: str, device, in_model_dtype: bool | None = None) -> str:
    """What a saved checkpoint is evaluated in on `device` (trainer.eval_in_model_dtype): model.dtype
    when `in_model_dtype` says so (null: on a GPU; bf16 weights read as they are, as RL's inference copy
    samples: rl.inference_copy), else float32 (as a policy trained on a CPU is evaluated: its fp32
    weights)."""
    if in_model_dtype is None:
        in_model_dtype = torch.device(device).type == "cuda"
    return model_dtype if in_model_dtype else "float32"


def evaluate_checkpoint(checkpoint: str, tasks, rl: RLConf, ctx: JobContext, *, meta: dict | None = None,
                        trainer: TrainerConf | None = None) -> dict:
    """Score a saved checkpoint on held-out tasks into the run dir (per_task + summary.json with the
    run's metadata, `meta` and the checkpoint). It runs where and as `trainer` computes: loaded on
    eval_device(trainer) in evaluation_dtype (model.dtype on a GPU, float32 on the CPU, unless
    trainer.eval_in_model_dtype says otherwise),
    converted and run under trainer.precision's plugin, which is how a trained policy's final evaluation
    runs, so SFT stages, experts and merges in one table are evaluated alike (on a GPU under bf16-mixed
    with model.dtype=bfloat16: bf16 weights, as the experts' inference copy)."""
    trainer = trainer or TrainerConf()
    device = eval_device(trainer)
    precision = evaluation_precision(trainer, device)
    dtype = evaluation_dtype(ctx.dtype, device, trainer.eval_in_model_dtype)
    model, tok = load_model("hf", path=str(checkpoint), dtype=dtype, device=device)
    model = precision.convert_module(model)
    with precision.forward_context():
        return evaluate_policy(make_engine("hf", model, tok, generation=rl.generation), tok, tasks, rl, ctx,
                               meta={**ctx.meta, **(meta or {}), "checkpoint": str(checkpoint)})
