"""The inference copy (rl.inference_copy): the trained policy's weights in model.dtype, which the hf
engine samples rollouts and held-out evaluations from instead of the fp32 master weights.

Why: the masters generate under the trainer's autocast, and Lightning 2.6 enters autocast with its
cast cache off, so every decode step casts every weight to bf16 again (for a 4B policy, 16 GB read and
8 GB written per generated token); a bf16 copy is read as it is. It costs model.dtype's bytes per
parameter on the device (2 in bf16: 8 GB at 4B). It is refreshed in place after each update, so its
samples come from the updated policy rounded to its dtype. The update stays exact: the trainer
recomputes the old log-probs with the masters, and rl.tis_cap's truncated importance weights correct
for the copy's rounding as they do for vLLM's kernels. Under LoRA the copy is a plain model with the
adapter merged in: each refresh writes base + B A x scale into the adapted layers (the rest is frozen),
so generation also skips the adapter's extra matmuls.
"""
from __future__ import annotations

import copy

import torch

# Lightning precisions that keep fp32 weights and autocast the compute to 16 bits ("bf16" and "16"
# are Lightning's older names for the mixed ones)
MIXED_16 = ("bf16-mixed", "16-mixed", "bf16", "16")
HALF_DTYPES = ("bfloat16", "bf16", "float16", "fp16")


def use_inference_copy(setting: str, *, engine: str, device: torch.device, precision, model_dtype: str) -> bool:
    """Whether a run samples from an inference copy. auto: on only where it saves time, i.e. the hf
    engine on a GPU in 16-bit mixed precision with a 16-bit model.dtype (a float32 copy would be the
    masters again; under *-true precisions the trained weights are 16-bit already). on | off: as set."""
    if str(setting) == "off":
        return False
    if str(setting) == "on":
        if str(engine) != "hf":
            raise ValueError("rl.inference_copy=on is for rl.engine=hf (a vLLM engine holds its own copy); "
                             "set rl.inference_copy=auto")
        return True
    if str(setting) != "auto":
        raise ValueError(f"rl.inference_copy={setting!r}; choose auto, on or off")
    return (str(engine) == "hf" and torch.device(device).type == "cuda" and str(precision) in MIXED_16
            and model_dtype in HALF_DTYPES)


def _cast_clone(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """A deep copy of `model` whose parameters are `dtype` copies of its own, without a full-precision
    copy on the way: deepcopy's memo hands it the cast tensors. Parameters shared by several modules
    (tied embeddings) map to one cast tensor, so they stay shared. Buffers are copied as they are
    (rotary frequencies stay float32, as from_pretrained leaves them)."""
    memo = {id(p): torch.nn.Parameter(p.detach().to(dtype, copy=True), requires_grad=False)
            for p in model.parameters()}
    clone = copy.deepcopy(model, memo)
    return clone.eval()


def _is_lora(model: torch.nn.Module) -> bool:
    return hasattr(model, "merge_and_unload")  # a peft model (policy.models.add_lora)


def _merged_lora_weights(policy: torch.nn.Module):
    """(name in the merged plain model, base weight + each active adapter's delta in fp32) of every layer
    LoRA adapts (models.lora_merged_weight): what peft's merge_and_unload would write there."""
    from peft.tuners.lora import LoraLayer

    from .models import lora_merged_weight

    for name, module in policy.get_base_model().named_modules():
        if isinstance(module, LoraLayer):
            yield f"{name}.weight", lora_merged_weight(module)


class InferenceCopy:
    """`model`: the copy (an ordinary transformers model in eval mode, no gradients; under LoRA with the
    adapter merged in); `place` puts it beside the policy and loads the policy's weights, `refresh`
    loads them where it is."""

    def __init__(self, policy: torch.nn.Module, dtype: torch.dtype):
        clone = _cast_clone(policy, dtype)
        # LoRA: merged once here in `dtype` (the base's weights, frozen, stay); each refresh then writes
        # the adapted layers' merged weights, computed in fp32
        self.model = clone.merge_and_unload().eval() if _is_lora(policy) else clone
        self.lora = _is_lora(policy)

    def nbytes(self) -> int:
        """The device memory its weights take (tied tensors once)."""
        return sum(p.numel() * p.element_size() for p in self.model.parameters())

    @torch.no_grad()
    def refresh(self, policy: torch.nn.Module) -> None:
        """The policy's current weights into the copy's tensors in place (copy_ casts and moves; no
        tensor is reallocated, so the engine, which holds the copy, needs nothing else)."""
        mine = dict(self.model.named_parameters())
        for name, p in _merged_lora_weights(policy) if self.lora else policy.named_parameters():
            mine[name].copy_(p)

    def place(self, policy: torch.nn.Module, device: torch.device | None = None) -> None:
        """Move the copy to `device` (default: the policy's) and refresh it: at train start, after a
        resume's restore and the strategy's move of the policy; and before the final evaluation."""
        self.model.to(device or next(policy.parameters()).device)
        self.refresh(policy)
