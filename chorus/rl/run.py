"""Run execution-guided RL from one checkpoint and export the expert.

The run dir holds: ckpt/ (the resume point last.ckpt and weights-only snapshots, rl/checkpoints.py),
steps.jsonl (step scalars), rollouts.jsonl (every trained sample), eval/step_N/ (periodic held-out
tables), hf/ (the exported policy) and per_task.{jsonl,parquet} + summary.json (the final held-out
evaluation)."""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import lightning as L
import torch

from ..config.job_context import JobContext
from ..config.schema import RLConf, TrainerConf
from ..fsdp import unsharded
from ..heldout import evaluate_policy
from ..policy.engines import SamplingParams, make_engine
from ..policy.inference_copy import use_inference_copy
from ..policy.models import check_dtype, export_merged, load_model, merged_lora_weights
from ..trainer_setup import build_trainer, eval_device, fused_optimizer, lightning_errors, use_gradient_checkpointing
from .algos import RLAlgo
from .checkpoints import WeightSnapshots, resume_checkpoint, resume_step
from .module import RLModule
from .preemption import StopOnSignal
from .rollouts import RolloutSpec, collect
from .selection import Selection, select_steps
from .loop import RunLoop, hf_engine, load_policy
from .task_sampler import TaskSampler, rollout_steps

log = logging.getLogger("chorus.rl")


class _Ticks(torch.utils.data.IterableDataset):
    """Endless step ticks: the data itself comes from rollouts, and max_steps ends the run."""

    def __iter__(self):
        while True:
            yield 0


def model_identity(path: str, lora: dict | None) -> dict:
    """What a resumed run must share with its checkpoint: the init (config, weight files) and the adapter."""
    p = Path(path)
    cfg = p / "config.json"
    weights = sorted((f.name, f.stat().st_size) for f in p.glob("*.safetensors")) if p.is_dir() else []
    return {"init": str(p.resolve()) if p.exists() else path,
            "config_sha": hashlib.sha256(cfg.read_bytes()).hexdigest()[:16] if cfg.exists() else None,
            "weights": [list(w) for w in weights], "lora": lora or None}


def weight_sync(engine):
    """After each update: the trainer's weights into the engine, which then drops its prefix cache
    (engine.sync_weights does both, so no caller can load without the reset). Full weights, or under
    LoRA the adapter merged into the base (the engine serves the plain base model: its names, no
    adapter tensors)."""
    def sync(model) -> None:
        if hasattr(model, "peft_config"):  # the adapter merged out of place: training goes on unmerged
            engine.sync_weights(merged_lora_weights(model))
        else:
            engine.sync_weights(full_tensors(model))
    return sync


def full_tensors(model):
    """The model's state, one full tensor at a time under its own names: under FSDP each shard is
    gathered as it is read (a collective every rank makes in the same order; an offloaded shard goes
    to its mesh's device for it), so no rank holds more than one gathered fp32 tensor."""
    from torch.distributed.tensor import DTensor

    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if isinstance(tensor, DTensor):
                tensor = tensor.to(tensor.device_mesh.device_type).full_tensor()
            yield name, tensor


def vllm_options(rl: RLConf, fit: L.Trainer) -> dict:
    """What RL's vLLM engine is built with beyond its path, dtype, seed and memory share: sequences of
    at most prompt + completion tokens, a rollout's rows at once, sleep mode, and under a
    multi-process strategy the process group Lightning made (TRL's colocate mode: vLLM's
    external_launcher with the ranks named in the environment, one engine per rank)."""
    import os

    if fit.world_size > 1:
        os.environ.update(RANK=str(fit.global_rank), LOCAL_RANK=str(fit.local_rank), WORLD_SIZE=str(fit.world_size))
    return {"max_model_len": rl.max_prompt_tokens + rl.max_new_tokens,
            "max_num_seqs": rl.prompts_per_generate * max(rl.group_size, rl.eval_samples),
            "distributed": fit.world_size > 1, "sleep": rl.vllm_sleep}


def _trim_logs(paths, step: int) -> None:
    """Drop log lines past the checkpoint a run resumes from (a killed run may have logged more)."""
    for p in paths:
        if p.exists():
            keep = [ln for ln in p.read_text().splitlines() if ln and json.loads(ln)["step"] <= step]
            p.write_text("".join(ln + "\n" for ln in keep))


@dataclass
class Objective:
    """What a policy-training run optimises: how a step's batch is collected, which module updates
    on it, and what else gets logged per step. RL is the default; OPD supplies its own."""
    # (draw, engine, tokenizer, pool, spec, prompts_per_step, seed=, after_generation=) -> batch; it calls
    # after_generation() once its last sample is drawn, before anything else takes memory (OPD's teachers)
    collect: Callable = collect
    module: Callable = RLModule  # (model, algo, rl, hooks, identity, ref_model=) -> LightningModule
    log_batch: Callable[[Path, int, object], None] | None = None


def check_run(algo: RLAlgo, rl: RLConf, trainer: TrainerConf) -> None:
    """Refuse combinations that cannot train, before any model loads."""
    if rl.engine == "openai":  # a server's weights are not the module being trained
        raise ValueError("rl.engine=openai cannot train: the served model does not receive the trainer's weights; "
                         "use rl.engine=hf or vllm (engine=openai is for chorus.evaluate)")
    if trainer.strategy == "fsdp" and rl.engine != "vllm":
        # each forward of the sharded policy gathers weights from every rank: HF generation, whose rows end at
        # different lengths on different ranks (and rank 0's evaluations alone), would wait forever
        raise ValueError("trainer=fsdp cannot generate with HF generate inside the sharded module; set rl.engine=vllm")
    if algo.advantage in ("grpo", "dapo") and rl.group_size < 2:
        raise ValueError(f"rl.group_size={rl.group_size} with {algo.name}'s std-normalised advantage: a group of 1 "
                         "has no std; use rl.group_size >= 2 or rl_algo=dr_grpo")
    check_dtype(rl.export_dtype, "rl.export_dtype")
    if trainer.strategy == "fsdp" and rl.lora.r > 0:  # the vLLM sync merges each adapted layer whole
        raise ValueError("trainer=fsdp with LoRA is not supported (the vLLM sync merges the adapter into whole, "
                         "unsharded layers); use trainer=ddp with LoRA, or full fine-tuning (rl.lora.r=0)")
    if rl.select_every and trainer.strategy in ("ddp", "fsdp"):
        raise ValueError(f"rl.select_every evaluates and keeps one device's weights; with trainer={trainer.strategy} "
                         "set rl.select_every=0 (the last step's weights)")
    for key in ("save_every", "resume_every"):
        if getattr(rl, key) < 0:
            raise ValueError(f"rl.{key}={getattr(rl, key)} is negative; use a step count, or 0 for none")


def inference_copy(rl: RLConf, trainer: TrainerConf, dtype: str) -> bool:
    """Whether this run's hf engine samples from an inference copy (rl.inference_copy)."""
    return use_inference_copy(rl.inference_copy, engine=rl.engine, device=eval_device(trainer),
                              precision=trainer.precision, model_dtype=dtype)


def train_rl(init: str, algo: RLAlgo, tasks, eval_tasks, ctx: JobContext, *, rl: RLConf,
             trainer: TrainerConf | None = None, objective: Objective = Objective(),
             ckpt_path: str | None = None, select_tasks=None) -> dict:
    """RL (or another on-policy objective) from `init` into ctx.out for rl.steps rollout iterations (or
    rl.passes over `tasks`); resumes from <run dir>/ckpt/last.ckpt if rl.resume, else from the Lightning
    checkpoint `ckpt_path` when given (its step, optimizer and data position). With rl.select_every, the
    weights exported and evaluated are those with the best Pass@1 on `select_tasks` (validation; rl/selection.py).
    ctx.on_step also hears each step's scalars. The steps: check, load the policy, build the loop's
    hooks (rl/loop.py), fit, then export and evaluate what the run chose."""
    trainer = trainer or TrainerConf()
    rl = planned_run(algo, rl, trainer, tasks, select_tasks)
    use_copy = inference_copy(rl, trainer, ctx.dtype)  # a bad rl.inference_copy fails before any model loads
    ctx.out.mkdir(parents=True, exist_ok=True)
    L.seed_everything(ctx.seed, workers=True, verbose=False)
    policy = load_policy(init, algo, rl, ctx.dtype, use_copy)
    spec = RolloutSpec(algo, ctx.fmt, rl.group_size, SamplingParams(max_new_tokens=rl.max_new_tokens,
                                                                    temperature=rl.temperature, seed=ctx.seed),
                       ctx.sim, rl.reward, rl.max_prompt_tokens, rl.prompts_per_generate)
    selection = Selection(ctx.out, select_steps(rl, rl.steps)) if rl.select_every else None
    with contextlib.nullcontext(ctx.executor) as pool:  # the caller's: it outlives this run
        fit = _lightning(rl, trainer, ctx.out, ctx.out / "ckpt")
        # vLLM is built at train start (RunLoop.start_vllm), once the process group exists; HF's engine now
        loop = RunLoop(init, rl, ctx, policy, TaskSampler(tasks, ctx.seed), spec, fit, pool, objective.collect,
                       objective.log_batch, eval_tasks, select_tasks, selection,
                       engine=hf_engine(policy, rl) if rl.engine == "hf" else None,
                       make_vllm=lambda lp: make_engine("vllm", policy.model, policy.tokenizer, path=init,
                                                        dtype=ctx.dtype, seed=ctx.seed + fit.global_rank,
                                                        gpu_memory=rl.vllm_memory, **vllm_options(rl, fit)),
                       weight_sync=weight_sync)
        use_gradient_checkpointing(policy.model, trainer)
        module = objective.module(policy.model, algo, rl, loop.hooks(), model_identity(init, policy.lora),
                                  ref_model=policy.ref, logit_chunk=trainer.logit_chunk,
                                  pack_sequences=trainer.pack_sequences, fused=fused_optimizer(trainer))
        resume = fit_module(fit, module, rl, ckpt_path, selection)
        # trainer=fsdp: every rank sends its shards to rank 0's plain copy of the policy (else: the policy)
        trained = unsharded(module.model, lambda: load_model("hf", path=init, dtype="float32", lora=policy.lora)[0])
        if not fit.is_global_zero:
            return {}
        return export_and_evaluate(trained, loop, trainer, resume)


def planned_run(algo: RLAlgo, rl: RLConf, trainer: TrainerConf, tasks, select_tasks) -> RLConf:
    """`rl` with its length decided (task_sampler.rollout_steps), after every refusal that needs no model."""
    check_run(algo, rl, trainer)
    if rl.micro_batch is None and not rl.micro_tokens:
        raise ValueError("rl.micro_batch=null (auto) is sized by chorus.train from the memory plan "
                         "(memory_plan.plan_training); give a number when calling train_rl or train_opd directly")
    if rl.select_every and not select_tasks:
        raise ValueError("rl.select_every chooses the checkpoint on validation tasks, and this run has none; "
                         "set rl.select_every=0 or give it validation tasks")
    return dataclasses.replace(rl, steps=rollout_steps(rl, len(tasks)))


def fit_module(fit: L.Trainer, module, rl: RLConf, ckpt_path: str | None, selection: Selection | None) -> str | None:
    """Lightning's loop over `module`, resumed from the run's last.ckpt (rl.resume) or `ckpt_path`, with
    the logs and the validation curve trimmed to the step it resumes from; returns that checkpoint."""
    out = Path(fit.default_root_dir)
    last = out / "ckpt" / "last.ckpt"
    resume = str(last) if rl.resume and last.exists() else ckpt_path
    _trim_logs((out / "steps.jsonl", out / "rollouts.jsonl", out / "decisions.jsonl"),
               resume_step(resume) if resume else 0)
    if selection:
        selection.trim(resume_step(resume) if resume else 0)
    module.model.train()
    with warnings.catch_warnings():  # the post-update state is exactly what a resume needs
        warnings.filterwarnings("ignore", message="Using ModelCheckpoint with manual optimization")
        with lightning_errors():
            fit.fit(module, torch.utils.data.DataLoader(_Ticks(), batch_size=None), ckpt_path=resume)
    if fit.interrupted:
        raise KeyboardInterrupt
    return resume


def export_and_evaluate(trained, loop: RunLoop, trainer: TrainerConf, resume: str | None) -> dict:
    """Rank 0 after fit: the weights the run chose (rl.select_every's, else the last step's) exported to
    <out>/hf and evaluated on the held-out tasks where they trained."""
    rl, ctx, fit, policy = loop.rl, loop.ctx, loop.fit, loop.policy
    trained.eval()
    if loop.selection:  # the validation's choice, exported and evaluated in place of the last step's weights
        best = loop.selection.restore(trained)
        ctx = dataclasses.replace(ctx, meta={**ctx.meta, "selected_step": best["step"],
                                             "selected_validation_pass": best["pass_rate"],
                                             "selection": loop.selection.curve()})
    # full precision by default: merges work on task vectors that bf16 rounding would erase
    export = export_merged(trained, policy.tokenizer, ctx.out / "hf", dtype=rl.export_dtype)
    record = {**ctx.meta, "init": loop.init, "checkpoint": str(export), "steps": fit.global_step,
              "resumed_from": resume, "data_position": loop.sampler.state_dict()}
    # Lightning's teardown put the module back on the CPU: evaluate where it trained. An inference
    # copy stays there (not a submodule) and is refreshed from the final policy, which need not move
    if policy.inference:
        policy.inference.place(trained, eval_device(trainer))
    elif rl.engine == "hf":
        trained.to(eval_device(trainer))
    with fit.precision_plugin.forward_context():  # the policy (or its copy) generates as in training
        engine = make_engine("hf", trained, policy.tokenizer, generation=rl.generation) \
            if rl.engine == "hf" and not policy.inference else loop.engine
        summary = evaluate_policy(engine, policy.tokenizer, loop.eval_tasks, rl, ctx, meta=record)
    return {**record, "pass_rate": summary["pass_rate"], "mean_overall": summary["mean_overall"]}


def _lightning(rl: RLConf, trainer: TrainerConf, out: Path, ckpt_dir: Path) -> L.Trainer:
    """The Lightning trainer of a run: rl.steps optimizer steps, weights-only snapshots every rl.save_every,
    the resume point (with the optimizer) every rl.resume_every and at a SIGTERM or SIGINT, which then
    stops the run (preemption.Preempted); rl/checkpoints.py."""
    callbacks = [WeightSnapshots(ckpt_dir, rl.save_every), StopOnSignal(ckpt_dir / "last.ckpt"),
                 resume_checkpoint(ckpt_dir, rl.resume_every)]
    return build_trainer(trainer, max_steps=rl.steps, logger=L.pytorch.loggers.CSVLogger(str(out), name="lightning"),
                         callbacks=callbacks, default_root_dir=str(out),
                         limit_val_batches=0, num_sanity_val_steps=0, log_every_n_steps=1)
