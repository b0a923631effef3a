"""The trainers' AdamW and their gradient clipping, the same for SFT, RL and OPD on every device.

trainer.fused_optimizer picks torch's fused AdamW kernel (one kernel over all parameters: no foreach
transient copies of every state tensor, ~15 GiB at 4B on a GPU). torch has it on the CPU too, so the
CPU suite runs the path a GPU run takes. Lightning 2.6 refuses `clip_gradients` for any optimizer that
could unscale gradients inside its step (a fused one), even under bf16-mixed, which has no gradient
scaler: there the gradients are already unscaled, so chorus clips them itself with torch's
`clip_grad_norm_` over the optimizer's parameters, which is what Lightning's plugin would run (FSDP2's
sharded gradients included: the norm is taken over the DTensors). Under 16-mixed the gradients are
scaled until the step; a fused optimizer is refused there (trainer_setup.fused_optimizer) and the
clip goes through Lightning, which owns the scaler.
"""
from __future__ import annotations

import torch


def fused_devices() -> list[str]:
    """The device types torch has a fused AdamW kernel for (cuda, cpu, mps, ...)."""
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices
    except ImportError:  # torch renamed its helper: the kernels CUDA and the CPU have had since torch 2.4
        return ["cuda", "cpu"]
    return list(_get_fused_kernels_supported_devices())


def adamw(params, lr: float, weight_decay: float, fused: bool) -> torch.optim.AdamW:
    """AdamW over `params`, fused (one kernel) or foreach (torch's default)."""
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=True if fused else None)


def clip_grad_norm(module, optimizer, max_norm: float) -> None:
    """Scale the gradients of `optimizer`'s parameters so that their total norm is at most `max_norm`
    (0: no clipping). `module` is the LightningModule: under a gradient scaler (16-mixed) Lightning's
    own clip runs, which knows the scale."""
    if max_norm <= 0:
        return
    if getattr(module.trainer.precision_plugin, "scaler", None) is not None:
        module.clip_gradients(optimizer, gradient_clip_val=max_norm, gradient_clip_algorithm="norm")
        return
    opt = getattr(optimizer, "optimizer", optimizer)  # the LightningOptimizer's torch optimizer
    params = [p for group in opt.param_groups for p in group["params"] if p.grad is not None]
    if params:
        torch.nn.utils.clip_grad_norm_(params, max_norm)
