"""Policy-gradient losses as pure tensor functions (verl style), tested on hand-computed values.

Shapes: [batch, tokens]; `mask` is 1 on completion tokens. The aggregation decides what a
micro-batch contributes, so that micro-batches of one optimizer step add up to the full batch:
- token_mean (DAPO): sum over tokens / `normalizer` = tokens in the whole step;
- seq_mean (GRPO): mean over each sequence's tokens, summed / `normalizer` = sequences in the step;
- seq_sum_const (Dr. GRPO): sum over tokens / (`normalizer` sequences x `max_tokens`).
"""
from __future__ import annotations

from typing import Callable

import torch

from .packing import padded_tokens


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(pi || ref): exp(ref - logp) - (ref - logp) - 1 (always >= 0)."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, mode: str, normalizer: float,
              max_tokens: int | None = None) -> torch.Tensor:
    mask = mask.to(per_token.dtype)
    if mode == "token_mean":
        return (per_token * mask).sum() / normalizer
    if mode == "seq_mean":
        per_seq = (per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1)
        return per_seq.sum() / normalizer
    if mode == "seq_sum_const":
        if not max_tokens:
            raise ValueError("seq_sum_const needs max_tokens (the generation budget)")
        return (per_token * mask).sum() / (normalizer * max_tokens)
    raise ValueError(f"unknown loss aggregation {mode!r}; use token_mean, seq_mean or seq_sum_const")


def clipped_pg_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                    eps_low: float = 0.2, eps_high: float = 0.28, mode: str = "token_mean", normalizer: float = 1.0,
                    max_tokens: int | None = None, ref_logp: torch.Tensor | None = None,
                    kl_coef: float = 0.0, is_weights: torch.Tensor | None = None) -> tuple[torch.Tensor, dict]:
    """PPO-clip surrogate with asymmetric clipping (DAPO's clip-higher); advantages per sequence
    [batch] or per token [batch, tokens]; `is_weights` [batch, tokens] (no gradient) scale each
    token's surrogate (truncated importance sampling: tis_weights). Returns (loss, stats)."""
    adv = advantages if advantages.dim() == 2 else advantages[:, None].expand_as(logp)
    ratio = torch.exp(logp - old_logp)
    clipped = ratio.clamp(1 - eps_low, 1 + eps_high)
    per_token = -torch.minimum(ratio * adv, clipped * adv)
    if is_weights is not None:
        per_token = per_token * is_weights.detach()
    if kl_coef and ref_logp is not None:
        per_token = per_token + kl_coef * k3_kl(logp, ref_logp)
    loss = aggregate(per_token, mask, mode, normalizer, max_tokens)
    m = mask.bool()
    n = m.sum().clamp(min=1)
    dev = (ratio.detach() - 1).abs()[m]
    stats = {"clip_frac_low": float(((ratio < 1 - eps_low) & (adv < 0) & m).sum() / n),
             "clip_frac_high": float(((ratio > 1 + eps_high) & (adv > 0) & m).sum() / n),
             "ratio_dev_max": float(dev.max()) if dev.numel() else 0.0}
    return loss, stats


def tis_weights(trainer_logp: torch.Tensor, engine_logp: torch.Tensor, mask: torch.Tensor, cap: float) -> torch.Tensor:
    """Truncated importance sampling between the engine that sampled and the trainer that scores the
    same old policy: min(exp(trainer - engine), cap) per token (TRL's and verl's correction for vLLM's
    kernels and precision), 0 off the mask."""
    if cap <= 0:
        raise ValueError(f"rl.tis_cap must be > 0 or null, got {cap}")
    return torch.exp(trainer_logp - engine_logp).clamp(max=cap) * mask


def sft_loss(logp: torch.Tensor, labels: torch.Tensor, normalizer: float | None = None) -> torch.Tensor:
    """Next-token cross-entropy over labelled positions (-100 = ignore; position 0 has no prediction),
    from each token's log-prob aligned as token_logprobs gives it; token mean over the micro-batch."""
    mask = labels[:, 1:] != -100
    n = normalizer if normalizer is not None else int(mask.sum().clamp(min=1))
    return -(logp[:, 1:] * mask).sum() / n


def minibatch_slices(rows: int, n: int) -> list[slice]:
    """`n` contiguous slices of a rollout's `rows` sequences, as even as possible (the first
    rows % n get one more); some are empty when rows < n. One optimizer step each, except one
    that is empty on every rank (RLModule._plan leaves it out)."""
    if n < 1:
        raise ValueError(f"rl.mini_batches must be >= 1, got {n}")
    q, r = divmod(rows, n)
    out, start = [], 0
    for k in range(n):
        size = q + (k < r)
        out.append(slice(start, start + size))
        start += size
    return out


def minibatch_counts(completion_mask: torch.Tensor, parts: list[slice], mode: str) -> list[float]:
    """What `aggregate` divides each mini-batch's loss by, before `minibatch_normalizers`: completion
    tokens for token_mean, sequences otherwise. Unclamped: under DDP the module sums these over ranks
    and only then clamps, so a rank with an empty mini-batch adds nothing to the others' normaliser."""
    if mode == "token_mean":
        return [float(completion_mask[sl].sum()) for sl in parts]
    return [float(completion_mask[sl].size(0)) for sl in parts]


def minibatch_normalizers(counts: list[float], world: int = 1) -> list[float]:
    """Each mini-batch's loss normaliser from its counts summed over the `world` ranks: at least 1 (an
    empty mini-batch contributes no loss), over the world size, since DDP averages gradients over ranks.
    A token-mean loss then does not depend on the micro-batch split, nor on how rows fell on the ranks."""
    return [max(1.0, float(c)) / world for c in counts]


def micro_slices(part: slice, lengths: list[int], micro_batch: int, micro_tokens: int | None = None,
                 tokens: Callable[[list[int]], int] = padded_tokens) -> list[slice]:
    """The forward/backward passes of one mini-batch (rows `part`): slices of `micro_batch` rows, or,
    with `micro_tokens`, as many consecutive rows as fit in that many tokens, counted by `tokens` over
    their `lengths` (padded: rows x the longest; a packed pass: the rows' own, packing.pass_tokens); a
    row longer than the budget goes alone. Empty when part is."""
    if micro_batch < 1:
        raise ValueError(f"rl.micro_batch must be >= 1, got {micro_batch}")
    if micro_tokens is not None and micro_tokens < 1:
        raise ValueError(f"rl.micro_tokens must be >= 1 or null, got {micro_tokens}")
    if micro_tokens is None:
        return [slice(s, min(s + micro_batch, part.stop)) for s in range(part.start, part.stop, micro_batch)]
    out, start = [], part.start
    for i in range(part.start, part.stop):
        if i > start and tokens(lengths[start:i + 1]) > micro_tokens:
            out.append(slice(start, i))
            start = i
    if part.stop > part.start:
        out.append(slice(start, part.stop))
    return out


def token_logprobs(logits: torch.Tensor, input_ids: torch.Tensor, temperature: float = 1.0,
                   with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-prob of each next token, aligned with `input_ids` ([B, T]; position 0 is 0), and optionally
    the entropy of each position's distribution. Logits are divided by the sampling temperature so
    the result matches what the engine sampled from. In fp32 at least (fp64 stays fp64). The update
    uses rl/logprobs.py, which gives these values at the completion positions without the full logits."""
    logits = logits[:, :-1]
    logp_all = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)) / temperature, dim=-1)
    picked = logp_all.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    pad = picked.new_zeros(picked.size(0), 1)
    entropy = None
    if with_entropy:
        entropy = torch.cat([pad, -(logp_all.exp() * logp_all).sum(-1)], dim=1)
    return torch.cat([pad, picked], dim=1), entropy
