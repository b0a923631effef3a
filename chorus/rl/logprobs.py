"""Log-probs of chosen tokens without the full-vocabulary logits (the memory-lean update).

A causal LM's forward computes a [rows, tokens, vocab] logits tensor over every position, prompt
included; at Qwen3's 151,936-token vocabulary, upcast to fp32 and log-softmaxed with autograd on,
that is ~18 bytes per token per vocabulary entry (tens of GiB per micro-batch). Here the body runs
once, the hidden states of the positions that predict a wanted token (the completion) are gathered,
and the output head runs on them in chunks of `chunk` positions: each chunk's log-prob is a gather
minus a logsumexp in fp32, under activation checkpointing, so only one chunk's logits exist at a
time, in the forward pass and again in the backward pass. The entropy is computed from the same
chunk without gradients. The result equals `losses.token_logprobs` on the full logits (at the
wanted positions; 0 elsewhere) to float tolerance, gradients included (tests/test_lean_logprobs.py).

Models whose logits are not `head(body(x))` (a final soft-cap or scale, a stand-in without a body)
fall back to the full forward; `split` checks the identity once per model on a few tokens.
With trainer.pack_sequences the rows run as one unpadded row (rl/packing.py), with the same results.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils.checkpoint import checkpoint

from ..fsdp import BODY_METHOD
from .packing import pack_rows, row_lengths, should_pack


@dataclass
class Forward:
    """One forward pass's results at the wanted positions (mask[:, 1:] over [B, T])."""
    logp: torch.Tensor  # [B, T] fp32: log-prob of token t at position t (0 where unwanted, and at t = 0)
    entropy: torch.Tensor | None  # [B, T] fp32, no gradient
    hidden: torch.Tensor  # [N, H] the features the head maps to the N wanted positions' logits
    head: torch.nn.Module  # hidden -> logits (nn.Identity on the fallback path, where hidden are the logits)
    select: torch.Tensor  # [B, T - 1] bool: the positions (predicting token t + 1) that were kept


def _base(model):
    return model.get_base_model() if hasattr(model, "get_base_model") else model  # peft wraps the HF model


def split(model) -> tuple[torch.nn.Module, torch.nn.Module] | None:
    """(body, head) of a transformers causal LM whose logits are head(body(x).last_hidden_state),
    checked once on 4 tokens against the model's own forward; None where that does not hold."""
    base = _base(model)
    body = base.get_decoder() if hasattr(base, "get_decoder") else None
    head = base.get_output_embeddings() if hasattr(base, "get_output_embeddings") else None
    config = getattr(base, "config", None)
    capped = any(getattr(config, k, None) for k in ("final_logit_softcapping", "logit_scale", "logits_scaling"))
    if body is None or head is None or body is base or capped:
        return _fallback(model, "its logits are not its head applied to its body's output")
    # a sharded model (trainer.strategy=fsdp) runs its body through the root's forward method, which
    # gathers the root's weights first (chorus/fsdp.py)
    body = getattr(model, BODY_METHOD, body)
    if not hasattr(model, "_chorus_head_split"):  # checked once, in eval mode (no dropout), without autocast
        ids = torch.arange(1, 5, device=head.weight.device)[None] % head.weight.shape[0]
        training = model.training
        model.eval()
        with torch.no_grad(), torch.autocast(head.weight.device.type, enabled=False):
            full = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits.float()
            parts = head(body(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).last_hidden_state)
            parts = parts.float()
        model.train(training)
        # a structural difference (a cap, a scale) moves logits by far more than kernels' rounding
        model._chorus_head_split = full.shape == parts.shape and torch.allclose(full, parts, rtol=1e-2, atol=1e-2)
    if not model._chorus_head_split:
        return _fallback(model, "head(body(x)) does not reproduce its logits")
    return body, head


def _fallback(model, why: str) -> None:
    """None (the full forward), said once per model: it costs the full logits' memory."""
    if not getattr(model, "_chorus_fallback_said", False):
        import warnings

        warnings.warn(f"{type(_base(model)).__name__}: {why}; computing full-vocabulary logits over every position "
                      "(more memory than the lean path)", stacklevel=3)
        try:
            model._chorus_fallback_said = True
        except AttributeError:
            pass
    return None


def _chunk_logp(head, hidden, targets, temperature: float, with_entropy: bool):
    logits = head(hidden)
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32)) / temperature  # fp64 stays fp64 (tests)
    lse = torch.logsumexp(logits, dim=-1)
    logp = logits.gather(-1, targets[:, None]).squeeze(-1) - lse
    if not with_entropy:
        return logp, None
    with torch.no_grad():
        p = torch.softmax(logits.detach(), dim=-1)
        entropy = lse.detach() - (p * logits.detach()).sum(-1)
    return logp, entropy


def chunked_logprobs(head, hidden, targets, temperature: float = 1.0, chunk: int = 1024,
                     with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log softmax(head(hidden) / T)[targets] for [N, H] hidden and [N] targets, `chunk` rows at a
    time; each chunk is checkpointed when gradients are on, so its logits are not kept for backward."""
    if chunk < 1:
        raise ValueError(f"trainer.logit_chunk must be >= 1, got {chunk}")
    grad = torch.is_grad_enabled() and hidden.requires_grad
    logps, ents = [], []
    for i in range(0, hidden.size(0), chunk):
        h, t = hidden[i:i + chunk], targets[i:i + chunk]
        if grad:
            lp, ent = checkpoint(_chunk_logp, head, h, t, temperature, with_entropy, use_reentrant=False)
        else:
            lp, ent = _chunk_logp(head, h, t, temperature, with_entropy)
        logps.append(lp)
        ents.append(ent)
    empty = hidden.new_zeros(0, dtype=torch.promote_types(hidden.dtype, torch.float32))
    logp = torch.cat(logps) if logps else empty
    return logp, (torch.cat(ents) if ents else empty) if with_entropy else None


def _scatter(values: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    """[N] values into a [B, T] tensor at select's positions (shifted by one: token t + 1), 0 elsewhere."""
    out = torch.zeros(select.shape, dtype=values.dtype, device=values.device).masked_scatter(select, values)
    return torch.cat([out.new_zeros(select.size(0), 1), out], dim=1)


def completion_hidden(model, ids: torch.Tensor, attn: torch.Tensor, mask: torch.Tensor, pack: bool | None = False):
    """(hidden [N, H], head, select [B, T - 1]): the features of the N positions that predict a wanted
    token (mask [B, T] = 1) and the head that maps them to logits; no logits computed. `pack`
    (trainer.pack_sequences) runs the rows as one unpadded row where packing.should_pack says so:
    the same N features in the same (row-major) order, so callers cannot tell the paths apart."""
    select = mask[:, 1:].bool()
    parts = split(model)
    packed = None
    if pack is not False and should_pack(model, row_lengths(attn), pack):  # False: no mask read back from a GPU
        packed = pack_rows(ids, attn, mask)
    # packed: no attention mask, or transformers would not read the restarts as packing. Never a KV cache:
    # a no-grad forward in eval mode (teachers, the reference, old log-probs) would otherwise keep every
    # layer's keys and values of every token until it returns (~9.7 GB at 4B, 8 x 8,192 tokens)
    inputs = ({"input_ids": packed.ids, "position_ids": packed.position_ids} if packed is not None
              else {"input_ids": ids, "attention_mask": attn})
    inputs["use_cache"] = False
    if parts is None:  # the full logits, then only the wanted positions
        out, head = model(**inputs).logits, torch.nn.Identity()
    else:
        body, head = parts
        out = body(**inputs).last_hidden_state
    return (out[0, :-1][packed.select] if packed is not None else out[:, :-1][select]), head, select


def forward_logprobs(model, ids: torch.Tensor, attn: torch.Tensor, mask: torch.Tensor, temperature: float = 1.0,
                     chunk: int = 1024, with_entropy: bool = False, pack: bool | None = False) -> Forward:
    """The log-prob (and entropy) of each wanted token (mask [B, T] = 1) under `model` at `temperature`,
    aligned as losses.token_logprobs: position t scores token t. `pack`: as completion_hidden."""
    hidden, head, select = completion_hidden(model, ids, attn, mask, pack)
    targets = ids[:, 1:][select]
    logp, entropy = chunked_logprobs(head, hidden, targets, temperature, chunk, with_entropy)
    return Forward(_scatter(logp, select), _scatter(entropy, select) if with_entropy else None, hidden, head, select)
