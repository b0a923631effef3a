"""How the hf engine decodes (rl.generation / policy.generation) and its cheap fence stop.

- plain: transformers' default dynamic KV cache with the eager forward. Every decode step pays
  Python and kernel-launch overhead per layer: on one H200 a 0.44B Qwen3 took about 70 ms per step
  at 64 x 512 tokens (DESIGN.md, GPU measurements), far above its arithmetic.
- static: a static KV cache of fixed shape, which lets transformers compile the decode step with
  torch.compile (mode reduce-overhead: CUDA graphs) on CUDA; elsewhere it decodes eagerly on the
  static cache unless compiling is forced (tests). The first call per batch size compiles (slow);
  transformers keeps the cache length at the largest seen so far, so later calls reuse the graphs.
- auto: static on CUDA, plain elsewhere (compiling on a CPU costs more than it saves here).
"""
from __future__ import annotations

import torch
from transformers import CompileConfig, StoppingCriteria

from ..modes import GenerationMode
from .fence_stop import FenceStop

MODES = tuple(m.value for m in GenerationMode)  # rl.generation / policy.generation's values


def resolve_mode(mode: str, device) -> str:
    """plain or static: what `mode` means for a model on `device`."""
    if str(mode) not in MODES:
        raise ValueError(f"unknown generation mode {mode!r}; choose one of {', '.join(MODES)}")
    if str(mode) == "auto":
        return "static" if torch.device(device).type == "cuda" else "plain"
    return str(mode)


def decode_kwargs(mode: str, device, compile: bool | None = None) -> dict:
    """`generate` keyword arguments for a resolved mode. compile: None = where transformers compiles a
    static cache by itself (CUDA), True = also on a CPU, False = never."""
    if mode == "plain":
        return {}
    kwargs: dict = {"cache_implementation": "static"}
    if compile is False:
        kwargs["disable_compile"] = True
    elif compile and torch.device(device).type != "cuda":
        config = CompileConfig()
        config._compile_all_devices = True  # transformers' own switch for compiling off CUDA
        kwargs["compile_config"] = config
    return kwargs


class FenceCriteria(StoppingCriteria):
    """transformers' stopping criterion over FenceStop: one device->host copy of the new column per
    step; the flags go back to the device only when another row has closed a fence."""

    def __init__(self, tokenizer, rows: int, width: int, device):
        self.state, self.width = FenceStop(tokenizer, rows), width
        self.flags, self.n_closed = torch.zeros(rows, dtype=torch.bool, device=device), 0

    def __call__(self, input_ids, scores, **kwargs):
        seen = len(self.state.ids[0]) if self.state.ids else 0
        done = list(self.state.closed)
        for column in input_ids[:, self.width + seen:].T.tolist():
            done = self.state.update(column)
        if sum(done) != self.n_closed:  # rows only ever close
            self.flags, self.n_closed = torch.tensor(done, device=input_ids.device), sum(done)
        return self.flags
