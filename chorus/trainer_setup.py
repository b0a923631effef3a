"""The Lightning side of a training job's `trainer` settings: the Trainer itself (chorus's settings,
then any other Lightning Trainer argument from trainer.extra and callbacks from trainer.callbacks),
the device rank 0 trains on, and activation checkpointing. Only the trainers (SFT, RL, OPD) call it.

trainer.extra is checked against Lightning's own Trainer signature before anything starts; the
arguments chorus sets itself are refused with the setting that owns them."""
from __future__ import annotations

import contextlib
import difflib
import importlib
import inspect

import lightning as L
import torch
from lightning.fabric.utilities.exceptions import MisconfigurationException
from omegaconf import OmegaConf

from .config.schema import TrainerConf

# Trainer arguments chorus sets: where each comes from instead
OWNED = {"max_steps": "rl.steps (sft_stage.steps for SFT)", "max_epochs": "rl.steps (sft_stage.steps for SFT)",
         "accelerator": "trainer.accelerator", "devices": "trainer.devices", "num_nodes": "trainer.num_nodes",
         "strategy": "trainer.strategy", "precision": "trainer.precision", "callbacks": "trainer.callbacks",
         "logger": "logger=", "default_root_dir": "the run dir",
         "enable_checkpointing": "rl.save_every and rl.resume_every",
         "enable_progress_bar": "chorus's own progress", "enable_model_summary": "chorus's own progress",
         "gradient_clip_val": "rl_algo / sft_stage settings", "limit_val_batches": "rl.eval_every",
         "num_sanity_val_steps": "rl.eval_every", "log_every_n_steps": "steps.jsonl (every step)"}


def check_trainer(trainer: TrainerConf) -> None:
    """Refuse trainer.extra keys Lightning's Trainer does not take (with the nearest one) or that chorus
    sets itself, trainer.callbacks entries without a _target_, CPU offload without FSDP, and a fused
    optimizer torch cannot run there; one line each."""
    accepted = set(inspect.signature(L.Trainer.__init__).parameters) - {"self"}
    for key in trainer.extra or {}:
        if key in OWNED:
            raise ValueError(f"trainer.extra.{key}: chorus sets it from {OWNED[key]}; set that instead")
        if key not in accepted:
            near = difflib.get_close_matches(key, sorted(accepted), n=1)
            hint = f"; did you mean trainer.extra.{near[0]}?" if near else ""
            raise ValueError(f"trainer.extra.{key} is not an argument of Lightning's Trainer{hint}")
    if trainer.fsdp_cpu_offload and trainer.strategy != "fsdp":
        raise ValueError(f"trainer.fsdp_cpu_offload=true needs trainer.strategy=fsdp (it is {trainer.strategy}); "
                         "set trainer=fsdp or trainer.fsdp_cpu_offload=false")
    fused_optimizer(trainer)
    for i, spec in enumerate(trainer.callbacks or []):
        if not isinstance(spec, dict) or not isinstance(spec.get("_target_"), str):
            raise ValueError(f"trainer.callbacks.{i} needs a _target_ (e.g. "
                             "{_target_: lightning.pytorch.callbacks.LearningRateMonitor})")


def make_callback(spec: dict) -> L.Callback:
    """A callback from {_target_: <module.Class>, <argument>: <value>, ...}."""
    kwargs = {k: OmegaConf.to_container(v) if OmegaConf.is_config(v) else v for k, v in spec.items() if k != "_target_"}
    module, _, name = spec["_target_"].rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValueError(f"trainer.callbacks: cannot import {spec['_target_']} ({exc})") from exc
    try:
        callback = cls(**kwargs)
    except TypeError as exc:
        raise ValueError(f"trainer.callbacks: {spec['_target_']}: {exc}") from exc
    if not isinstance(callback, L.Callback):
        raise ValueError(f"trainer.callbacks: {spec['_target_']} is not a Lightning Callback")
    return callback


def build_trainer(trainer: TrainerConf, *, max_steps: int, callbacks: list, **chorus_kwargs) -> L.Trainer:
    """Lightning's Trainer on `trainer`'s device settings, chorus's own arguments, trainer.extra and
    trainer.callbacks (after chorus's: a user's callback sees the step chorus's checkpoint saw)."""
    check_trainer(trainer)
    mine = [make_callback(dict(spec)) for spec in trainer.callbacks or []]
    if any(isinstance(c, L.pytorch.callbacks.Checkpoint) for c in mine):
        chorus_kwargs["enable_checkpointing"] = True  # the user's checkpoints, where chorus keeps none (SFT)
    with lightning_errors():
        return L.Trainer(max_steps=max_steps, accelerator=trainer.accelerator, devices=trainer.devices,
                         num_nodes=trainer.num_nodes, strategy=lightning_strategy(trainer), precision=trainer.precision,
                         callbacks=[*callbacks, *mine], enable_progress_bar=False, enable_model_summary=False,
                         **chorus_kwargs, **dict(trainer.extra or {}))


def lightning_strategy(trainer: TrainerConf):
    """Lightning's strategy for trainer.strategy: `fsdp` is chorus's FSDP2 (chorus/fsdp.py: several
    backward passes per optimizer step, clipping over sharded gradients, full state dicts), not
    Lightning's FSDP1 of the same name; any other name goes to Lightning as it is."""
    if trainer.strategy == "fsdp":
        from .fsdp import FSDP2Strategy

        return FSDP2Strategy(cpu_offload=trainer.fsdp_cpu_offload, precision=trainer.precision)
    return trainer.strategy


@contextlib.contextmanager
def lightning_errors():
    """Lightning's refusal of a setting (e.g. accumulate_grad_batches under RL's manual optimization) as
    the one-line ValueError every chorus job reports."""
    try:
        yield
    except MisconfigurationException as exc:
        raise ValueError(f"Lightning refused the trainer settings: {str(exc).splitlines()[0]}") from exc


def eval_device(trainer: TrainerConf, cuda_available: bool | None = None) -> torch.device:
    """The device rank 0 trains on, where evaluations and teachers belong: the first CUDA device
    `trainer.devices` names when the accelerator is a GPU (cuda, gpu, or auto with CUDA present),
    else the CPU. Lightning moves the module back to the CPU at the end of fit; the final evaluation
    moves the policy here again rather than generating on the CPU."""
    accel = str(trainer.accelerator).lower()
    if cuda_available is None:
        cuda_available = torch.cuda.is_available()
    if accel not in ("cuda", "gpu") and not (accel == "auto" and cuda_available):
        return torch.device("cpu")
    devices = trainer.devices
    if isinstance(devices, str) and "," in devices:  # Lightning's "1,3" (or "2,") names device indices
        devices = [int(d) for d in devices.split(",") if d.strip()]
    if isinstance(devices, (list, tuple)) or OmegaConf.is_list(devices):
        return torch.device("cuda", int(list(devices)[0]))
    return torch.device("cuda", 0)  # a count (or "auto", -1) starts at device 0


def fused_optimizer(trainer: TrainerConf) -> bool:
    """Whether the trainers' AdamW is torch's fused kernel (trainer.fused_optimizer; null: where training
    runs on a GPU, unless under 16-mixed). A fused AdamW where torch has no kernel for the device, or
    under 16-mixed (its gradient scaler would unscale inside the fused step, after chorus's clip), is
    refused in one line."""
    from .optimizer import fused_devices

    scaled = str(trainer.precision) in ("16-mixed", "16")
    device = eval_device(trainer).type
    if trainer.fused_optimizer is None:
        return device == "cuda" and not scaled
    if trainer.fused_optimizer and device not in fused_devices():
        raise ValueError(f"trainer.fused_optimizer=true: torch {torch.__version__} has no fused AdamW for {device}; "
                         "set trainer.fused_optimizer=false (or null)")
    if trainer.fused_optimizer and scaled:
        raise ValueError(f"trainer.fused_optimizer=true under trainer.precision={trainer.precision}: the gradient "
                         "scaler would unscale inside the fused step, after the clip; use bf16-mixed or "
                         "trainer.fused_optimizer=false")
    return bool(trainer.fused_optimizer)


def use_gradient_checkpointing(model, trainer: TrainerConf) -> bool:
    """Turn on activation checkpointing (non-reentrant: it works with frozen embeddings under LoRA and
    with a detached old-policy pass) as trainer.gradient_checkpointing says; null: where the policy
    trains on a GPU. transformers checkpoints only in train mode, so rollouts and evaluations are not
    slowed. Returns whether it is on."""
    on = trainer.gradient_checkpointing
    if on is None:
        on = eval_device(trainer).type == "cuda"
    if on:
        if not getattr(model, "supports_gradient_checkpointing", False):
            raise ValueError(f"trainer.gradient_checkpointing=true, but {type(model).__name__} does not support it; "
                             "set trainer.gradient_checkpointing=false")
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.2 renamed it
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return bool(on)


def evaluation_precision(trainer: TrainerConf, device: torch.device):
    """Lightning's precision plugin for trainer.precision on `device` (one device: evaluation does not
    shard), built the way fit builds it, so '16-mixed' on a CPU is refused as training would refuse it."""
    accelerator, devices = ("cuda", [device.index or 0]) if device.type == "cuda" else ("cpu", 1)
    return L.Trainer(accelerator=accelerator, devices=devices, precision=trainer.precision, logger=False,
                     enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False).precision_plugin
