"""How the hf engine decodes (rl.generation / policy.generation) and its cheap fence stop.

- plain: transformers' default dynamic KV cache with the eager forward. Every decode step pays
  Python and kernel-launch overhead per layer: on one H200 a 0.44B Qwen3 took about 70 ms per step
  at 64 x 512 tokens (a measurement the project made before this module), far above its arithmetic.
- static: a static KV cache of fixed shape, which lets transformers compile the decode step with
  torch.compile (mode reduce-overhead: CUDA graphs) on CUDA; elsewhere it decodes eagerly on the
  static cache unless compiling is forced (tests). The first call per batch size compiles (slow);
  transformers keeps the cache length at the largest seen so far, so later calls reuse the graphs.
- shared: chorus's decode loop (shared_decode.py) on transformers' forward: each distinct prompt is
  prefilled once and its KV cache copied to its n samples (the prefill was n times the work), the
  cache grows into preallocated buffers (GrowingLayer, below) instead of being concatenated anew each
  step, and finished rows leave the batch. On a tiny-preset checkpoint it samples 2.0x as fast as
  plain at 4 prompts x 16 samples on 2 CPU threads, 1.45x at 4 x 4 (bench/sampling_throughput.py).
- auto: static on CUDA, shared elsewhere (compiling on a CPU costs more than it saves here).
"""
from __future__ import annotations

import inspect

import torch
from transformers import (CompileConfig, LogitsProcessor, LogitsProcessorList, StoppingCriteria,
                          TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper)
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

from ..core.modes import GenerationMode
from .fence_stop import FenceStop

MODES = tuple(m.value for m in GenerationMode)  # rl.generation / policy.generation's values


def resolve_mode(mode: str, device) -> str:
    """plain or static: what `mode` means for a model on `device`."""
    if str(mode) not in MODES:
        raise ValueError(f"unknown generation mode {mode!r}; choose one of {', '.join(MODES)}")
    if str(mode) == "auto":
        return "static" if torch.device(device).type == "cuda" else "shared"
    return str(mode)


def decode_kwargs(mode: str, device, compile: bool | None = None) -> dict:
    """`generate` keyword arguments for a resolved mode. compile: None = where transformers compiles a
    static cache by itself (CUDA), True = also on a CPU, False = never."""
    if mode in ("plain", "shared"):
        return {}
    kwargs: dict = {"cache_implementation": "static"}
    if compile is False:
        kwargs["disable_compile"] = True
    elif compile and torch.device(device).type != "cuda":
        config = CompileConfig()
        config._compile_all_devices = True  # transformers' own switch for compiling off CUDA
        kwargs["compile_config"] = config
    return kwargs


class SampledLogprobs(LogitsProcessor):
    """The log-prob of each sampled token under the distribution it was drawn from, without
    `output_scores`, which keeps an fp32 [rows, vocab] tensor per decode step (~40 GB at 32 rows x
    2,048 steps of Qwen3's vocabulary). Runs last in `logits_processor` with the sampling warpers
    (temperature, top-k, top-p) before it, so it sees the final distribution; it keeps that step's
    log-softmax only until the next call, which sees the token drawn from it. `finish` takes the
    last step's tokens. Memory: one [rows, vocab] fp32 tensor and [rows, steps] floats."""

    def __init__(self):
        self.prev: torch.Tensor | None = None
        self.steps: list[torch.Tensor] = []

    def __call__(self, input_ids, scores):
        if self.prev is not None:
            self.steps.append(self.prev.gather(1, input_ids[:, -1:]).squeeze(1))
        self.prev = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, sequences: torch.Tensor) -> list[list[float]]:
        """[rows][steps] log-probs, given the finished sequences (prompt + completion)."""
        if self.prev is not None:
            self.steps.append(self.prev.gather(1, sequences[:, -1:]).squeeze(1))
            self.prev = None
        return torch.stack(self.steps, dim=1).tolist() if self.steps else [[] for _ in range(sequences.size(0))]


def sampling_processors(temperature: float, top_k: int, top_p: float) -> LogitsProcessorList:
    """The sampling warpers transformers would add, in its order, then SampledLogprobs; generate is
    then called with temperature 1, top_k 0 and top_p 1 so that it adds none of its own."""
    procs = LogitsProcessorList()
    if temperature != 1.0:
        procs.append(TemperatureLogitsWarper(temperature))
    if top_k:
        procs.append(TopKLogitsWarper(top_k))
    if top_p < 1.0:
        procs.append(TopPLogitsWarper(top_p))
    procs.append(SampledLogprobs())
    return procs


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


_LAZY_INIT_TAKES_VALUES = "value_states" in inspect.signature(DynamicLayer.lazy_initialization).parameters


class BufferedLayer(DynamicLayer):
    """A DynamicLayer whose keys and values are views of preallocated buffers `_k`, `_v` [rows, kv_heads,
    capacity, head_dim] filled to `_len`, so a decode step writes its positions instead of copying the
    whole cache (torch.cat). GrowingLayer's buffers double when full; the shared-prefix cache's suffix
    buffers (prefix_attention.SharedPrefixLayer) have a fixed size."""

    def append_kv(self, key_states: torch.Tensor, value_states: torch.Tensor):
        """Write one update's positions after the filled ones (the buffers have room for them) and return
        the keys and values so far, as a cache layer's `update` does."""
        end = self._len + key_states.shape[-2]
        self._k[:, :, self._len:end] = key_states
        self._v[:, :, self._len:end] = value_states
        self._len = end
        return self.view_filled()

    def view_filled(self):
        """`keys` and `values` pointed at the buffers' filled part (after an append, or rows moved)."""
        self.keys, self.values = self._k[:, :, :self._len], self._v[:, :, :self._len]
        return self.keys, self.values


class GrowingLayer(BufferedLayer):
    """A BufferedLayer whose buffers double when full."""

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor | None = None) -> None:
        # transformers 4.56-4.57 (vLLM's pins) take the keys only; 5.x takes keys and values
        if _LAZY_INIT_TAKES_VALUES:
            super().lazy_initialization(key_states, value_states)
        else:
            super().lazy_initialization(key_states)
        self._k = self._v = None
        self._len = 0

    def _reserve(self, need: int, like_k: torch.Tensor, like_v: torch.Tensor) -> None:
        if self._k is not None and need <= self._k.shape[-2]:
            return
        cap = max(need, 2 * (self._k.shape[-2] if self._k is not None else 0), 64)
        k = like_k.new_empty((*like_k.shape[:2], cap, like_k.shape[-1]))
        v = like_v.new_empty((*like_v.shape[:2], cap, like_v.shape[-1]))
        if self._len:
            k[:, :, :self._len] = self._k[:, :, :self._len]
            v[:, :, :self._len] = self._v[:, :, :self._len]
        self._k, self._v = k, v

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self._reserve(self._len + key_states.shape[-2], key_states, value_states)
        return self.append_kv(key_states, value_states)

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self._len:
            self._k = self._k.repeat_interleave(repeats, dim=0)
            self._v = self._v.repeat_interleave(repeats, dim=0)
            self.view_filled()

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self._len:
            self._k, self._v = self._k[indices], self._v[indices]
            self.view_filled()

    def crop(self, tokens_to_remove: int) -> None:
        super().crop(tokens_to_remove)
        if self.is_initialized and tokens_to_remove < 0:
            self._len = max(0, self._len + tokens_to_remove)


def growing_cache(model) -> Cache:
    """An empty cache of GrowingLayers, one per layer of `model`."""
    cache = DynamicCache()
    cache.layers = [GrowingLayer() for _ in range(model.config.num_hidden_layers)]
    cache.layer_class_to_replicate = None
    return cache


# Tokens (rows x padded width) one prefill forward takes at most. A prefill's activations grow with
# rows x width^2 (attention) and rows x width (the MLP): an agentic round's 512 distinct conversations
# (about 1,000 tokens each) prefilled at once, and two such evaluations side by side were killed for
# memory on a 24 GB machine. bench/prefill_chunks.py, 512 x 900 tokens on the tiny `s` model, one
# thread: peak 8.5 GB at once, 3.2 GB in chunks (36 rows at the full width), 2.1x faster. A direct
# evaluation's 32 prompts x <= 512 tokens is still one forward.
PREFILL_TOKENS = 32768


def shared_prefix_cache(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, n: int,
                        max_tokens: int | None = None) -> Cache | None:
    """A cache holding every distinct prompt's prefix (all but its last token), computed once and
    repeated for its n samples: `input_ids` and `attention_mask` are the prompts before repetition
    (left-padded). Positions are what `generate` gives a left-padded row (cumsum of the mask), so the
    cached keys are those generate's own prefill would compute. None when there is no prefix.

    Rows that fit `max_tokens` (default PREFILL_TOKENS) at the batch's width are one forward. Else they
    are prefilled longest first, in chunks of at most `max_tokens` tokens, each chunk only as wide as
    its longest row: a row's real positions get the keys they get in one forward (the padding before
    them is masked either way), its padded positions zeros."""
    if input_ids.shape[1] < 2:
        return None
    mask = attention_mask[:, :-1]
    positions = mask.long().cumsum(-1) - 1
    positions.masked_fill_(mask == 0, 1)
    budget, (total, width) = max_tokens or PREFILL_TOKENS, mask.shape
    kw, cache = cache_kwarg(model), growing_cache(model)
    if total * width <= budget:
        model(input_ids=input_ids[:, :-1], attention_mask=mask, position_ids=positions, use_cache=True,
              logits_to_keep=1, **{kw: cache})
    else:  # the longest row is `width` wide (left padding), so the first chunk fills the buffer's shape
        lengths = mask.sum(1)
        order = torch.argsort(lengths, descending=True, stable=True)
        start = 0
        while start < total and (w := int(lengths[order[start]])) > 0:  # rows with no prefix keep zeros
            rows = order[start:start + max(1, budget // w)]
            part = growing_cache(model)
            cols = slice(width - w, width)
            model(input_ids=input_ids[rows, cols], attention_mask=mask[rows, cols], position_ids=positions[rows, cols],
                  use_cache=True, logits_to_keep=1, **{kw: part})
            for layer, done in zip(cache.layers, part.layers):
                if not layer.is_initialized:  # every row's keys and values in one buffer
                    shape = (total, done.keys.shape[1], width, done.keys.shape[-1])
                    layer.update(done.keys.new_zeros(shape), done.values.new_zeros(shape))
                layer.keys[rows, :, cols], layer.values[rows, :, cols] = done.keys, done.values
            start += len(rows)
    if n > 1:
        cache.batch_repeat_interleave(n)
    return cache


def cache_kwarg(model) -> str:
    """The keyword a model's forward and `generate` take a cache by (`cache` since transformers 5.2x,
    `past_key_values` before)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a peft model forwards kwargs
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"
