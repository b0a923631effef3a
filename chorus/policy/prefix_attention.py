"""Prefix attention for the shared decode loop: each prompt's keys and values are kept once.

generation=shared prefills each distinct prompt once; before this, its cache was then copied to the
prompt's n samples, so every decode step read n copies of the same ~400-token prefix, and every row
that finished copied the whole cache of the rows left (a 16-sample evaluation of the tiny model spent
a quarter of its time in attention and a fifth in the kernel, faulting pages). Here a layer keeps

- the prefix: keys/values [prompts, kv_heads, prefix_len, head_dim] and which positions are real
  (prompts are left-padded), written once;
- the suffix: each live row's own tokens, [rows, kv_heads, <= max_new_tokens, head_dim];
- each row's prompt and slot (its sample number), so a finished row leaves only the suffix.

A decode step's attention (one query token a row) scores the row's query against its prompt's
prefix (all of a prompt's rows in one matrix product) and against its own suffix, then takes one
softmax over both: the same attention as over the copied cache, summed in another order.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch
from transformers import AttentionInterface
from transformers.cache_utils import Cache, DynamicCache

from .hf_generation import BufferedLayer

NAME = "chorus_prefix_cache"


class SharedPrefixLayer(BufferedLayer):
    """One layer's cache: the prompts' prefix once, each live row's suffix in a fixed-size buffer."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, real: torch.Tensor, n: int, capacity: int):
        super().__init__()
        self.prefix_k, self.prefix_v, self.real = keys, values, real  # [P, Hkv, Lp, d], [P, Lp] bool
        self.n = n
        prompts = keys.shape[0]
        self.row_prompt = torch.arange(prompts, device=keys.device).repeat_interleave(n)
        self.row_slot = torch.arange(n, device=keys.device).repeat(prompts)
        shape = (prompts * n, keys.shape[1], capacity, keys.shape[-1])
        self._k, self._v = keys.new_empty(shape), values.new_empty(shape)
        self._len = 0
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        end = self._len + key_states.shape[-2]
        if end > self._k.shape[-2]:
            raise RuntimeError(f"shared-prefix cache: {end} decode positions, room for {self._k.shape[-2]}")
        return self.append_kv(key_states, value_states)

    def get_seq_length(self, *args, **kwargs) -> int:
        return self.prefix_k.shape[-2] + self._len

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep rows `indices` (in that order): their suffixes move to the buffer's front in place."""
        m = indices.numel()
        self._k[:m, :, :self._len] = self._k[indices, :, :self._len]
        self._v[:m, :, :self._len] = self._v[indices, :, :self._len]
        self._k, self._v = self._k[:m], self._v[:m]
        self.row_prompt, self.row_slot = self.row_prompt[indices], self.row_slot[indices]
        self.view_filled()


def shared_prefix_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """[rows, 1, heads, d] attention output of one decode step; `key`/`value` are the rows' suffixes and
    the layer (kwargs chorus_prefix_cache: the cache) holds their prompts' prefixes."""
    layer = kwargs["chorus_prefix_cache"].layers[module.layer_idx]
    rows, heads, q_len, d = query.shape
    if q_len != 1:
        raise RuntimeError("shared-prefix attention decodes one token a row at a time")
    kv_heads = key.shape[1]
    group = heads // kv_heads  # query heads per key/value head, as transformers' repeat_kv pairs them
    scale = scaling if scaling is not None else d ** -0.5
    q = query.reshape(rows, kv_heads, group, d)
    prompts, _, prefix_len, _ = layer.prefix_k.shape
    where = (layer.row_prompt, layer.row_slot)
    # every row's query in its prompt's slot, so one product per prompt scores all of its samples
    slots = q.new_zeros((prompts, layer.n, kv_heads, group, d))
    slots[where] = q
    slots = slots.permute(0, 2, 1, 3, 4).reshape(prompts, kv_heads, layer.n * group, d)
    pre = (slots @ layer.prefix_k.transpose(-1, -2)) * scale  # [P, Hkv, n*g, Lp]
    pre = pre.masked_fill(~layer.real[:, None, None, :], float("-inf"))
    pre = pre.reshape(prompts, kv_heads, layer.n, group, prefix_len).permute(0, 2, 1, 3, 4)[where]
    own = (q @ key.transpose(-1, -2)) * scale  # [rows, Hkv, g, Ls]
    weights = torch.softmax(torch.cat([pre, own], -1).float(), -1).to(q.dtype)
    w_pre = weights[..., :prefix_len]
    spread = w_pre.new_zeros((prompts, layer.n, kv_heads, group, prefix_len))
    spread[where] = w_pre
    spread = spread.permute(0, 2, 1, 3, 4).reshape(prompts, kv_heads, layer.n * group, prefix_len)
    out_pre = (spread @ layer.prefix_v).reshape(prompts, kv_heads, layer.n, group, d).permute(0, 2, 1, 3, 4)[where]
    out = out_pre + weights[..., prefix_len:] @ value  # [rows, Hkv, g, d]
    return out.reshape(rows, 1, heads, d), None


AttentionInterface.register(NAME, shared_prefix_attention)


def applies(model) -> bool:
    """Full attention in every layer, decoded in transformers' sdpa or eager attention: what this
    attention reproduces (sliding windows or another kernel's semantics are not)."""
    cfg = getattr(model, "config", None)
    types = set(getattr(cfg, "layer_types", None) or ["full_attention"])
    return cfg is not None and types == {"full_attention"} and getattr(cfg, "_attn_implementation", None) in (
        "sdpa", "eager")


def prefix_cache(prefilled: Cache, real: torch.Tensor, n: int, capacity: int) -> Cache:
    """The cache the decode loop continues from: `prefilled` holds each prompt's prefix once (not
    repeated for its samples); `real` [P, Lp] marks its non-padding positions; `capacity` decode
    positions a row at most."""
    cache, real = DynamicCache(), real.bool()
    cache.layers = [SharedPrefixLayer(layer.keys, layer.values, real, n, capacity) for layer in prefilled.layers]
    cache.layer_class_to_replicate = None
    return cache


@contextmanager
def decoding_with(model):
    """The model's attention dispatched to shared_prefix_attention while the loop runs; restored after."""
    cfg = model.config
    before = cfg._attn_implementation
    cfg._attn_implementation = NAME
    try:
        yield
    finally:
        cfg._attn_implementation = before
