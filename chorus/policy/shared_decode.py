"""generation=shared: the decode loop. Each distinct prompt is prefilled once and its KV cache copied
to its n samples; the cache grows into preallocated buffers (hf_generation.GrowingLayer); a row that
finishes (EOS, a closed fence, the token limit) leaves the batch at once, so later steps compute only
the rows still decoding. transformers' `generate` keeps computing finished rows until the last one
ends, and its loop costs milliseconds per step in Python on a model this small.

What a row gets is what `generate` gives it: the same forward (positions from the left-padded mask,
as generate computes them), the same logits warpers (transformers' own classes), greedy = argmax,
log-probs of the processed scores. Greedy tokens are plain's; sampled ones are drawn from the same
distribution, but from a random stream consumed differently (only live rows draw), so a seed gives
other samples than under plain.
"""
from __future__ import annotations

from contextlib import nullcontext

import torch
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from . import prefix_attention
from .fence_stop import FenceStop
from .hf_generation import cache_kwarg, growing_cache, shared_prefix_cache

# generation_config settings whose logits processors this loop does not apply: a model that sets one
# is decoded by transformers' generate (on the shared prefix cache) instead.
_UNSUPPORTED = {"repetition_penalty": 1.0, "no_repeat_ngram_size": 0, "encoder_repetition_penalty": 1.0,
                "bad_words_ids": None, "min_length": 0, "min_new_tokens": None, "suppress_tokens": None,
                "begin_suppress_tokens": None, "forced_bos_token_id": None, "forced_eos_token_id": None,
                "sequence_bias": None, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0, "min_p": None,
                "typical_p": 1.0, "renormalize_logits": False}


def loop_applies(model) -> bool:
    """Whether the model's generation_config asks only for what this loop does."""
    cfg = getattr(model, "generation_config", None)
    return cfg is None or all(getattr(cfg, k, v) in (v, None) for k, v in _UNSUPPORTED.items())


def warpers(params) -> LogitsProcessorList:
    """transformers' warpers for these sampling settings, in generate's order."""
    out = LogitsProcessorList()
    if params.temperature > 0 and params.temperature != 1.0:
        out.append(TemperatureLogitsWarper(params.temperature))
    if params.top_k:
        out.append(TopKLogitsWarper(params.top_k))
    if params.top_p < 1.0:
        out.append(TopPLogitsWarper(params.top_p))
    return out


@torch.no_grad()
def shared_decode(model, tok, prompts: list[str], n: int, params, eos: tuple[int, ...],
                  on_prompt_done=None, prefix_once: bool = True) -> tuple[list, list, list]:
    """(token ids, log-probs, prompt lengths) per row, rows in prompt-major order (n per prompt).
    A row ends at any id of `eos` (policy/stops.py). `on_prompt_done(i, tokens, logprobs, prompt_lens)`
    is called as soon as prompt i's n rows have all finished (the lists as returned, complete for its
    rows), while the other rows still decode: a
    rollout hands that group to the simulator at once, so simulation overlaps generation.
    prefix_once: keep each prompt's prefix once (prefix_attention.py) where the model allows; False
    copies it to every sample (the reference it is tested and benchmarked against)."""
    device = next(model.parameters()).device
    once = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
    ids, mask = once["input_ids"], once["attention_mask"]
    by_prefix = prefix_once and prefix_attention.applies(model)
    cache = shared_prefix_cache(model, ids, mask, 1 if by_prefix else n)
    step_input = ids[:, -1:] if cache is not None else ids
    if cache is None:
        cache, by_prefix = growing_cache(model), False
    elif by_prefix:
        cache = prefix_attention.prefix_cache(cache, mask[:, :-1], n, params.max_new_tokens)
    # the prefix's attention needs no mask (it keeps its own padding), so none is built each step
    extra = {"attention_mask": {"full_attention": None}, "chorus_prefix_cache": cache} if by_prefix else {}
    step_input, mask = step_input.repeat_interleave(n, 0), mask.repeat_interleave(n, 0)
    rows = step_input.shape[0]
    prompt_lens = mask.sum(1).tolist()
    sample, process = params.temperature > 0, warpers(params)
    stop = FenceStop(tok, rows)
    live = list(range(rows))
    tokens: list[list[int]] = [[] for _ in range(rows)]
    logprobs: list[list[float]] = [[] for _ in range(rows)]
    kw = cache_kwarg(model)
    left = [n] * len(prompts)  # rows of each prompt still decoding

    def finished(rows_done) -> None:
        for r in rows_done:
            left[r // n] -= 1
            if left[r // n] == 0 and on_prompt_done is not None:
                on_prompt_done(r // n, tokens, logprobs, prompt_lens)

    torch.manual_seed(params.seed)
    with prefix_attention.decoding_with(model) if by_prefix else nullcontext():
        for step in range(params.max_new_tokens):
            width = step_input.shape[1]
            positions = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 1)[:, -width:]
            logits = model(input_ids=step_input, position_ids=positions, use_cache=True, logits_to_keep=1,
                           **{"attention_mask": mask, kw: cache, **extra}).logits[:, -1, :].float()
            scores = process(None, logits) if sample else logits
            chosen = (torch.multinomial(torch.softmax(scores, -1), 1)[:, 0] if sample else scores.argmax(-1))
            lp = torch.log_softmax(scores, -1).gather(1, chosen[:, None])[:, 0]
            chosen_l, lp_l = chosen.tolist(), lp.tolist()
            for r, t, v in zip(live, chosen_l, lp_l):
                tokens[r].append(t)
                logprobs[r].append(v)
            closed = stop.update(chosen_l, live)
            keep = [j for j, (r, t) in enumerate(zip(live, chosen_l)) if t not in eos and not closed[r]]
            kept = set(keep)
            finished([r for j, r in enumerate(live) if j not in kept])
            if not keep:
                live = []
                break
            if len(keep) < len(live):  # finished rows leave the batch and its cache
                index = torch.tensor(keep, device=device)
                cache.batch_select_indices(index)
                mask, chosen = mask[index], chosen[index]
                live = [live[j] for j in keep]
            mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], 1)
            step_input = chosen[:, None]
    finished(live)  # the rows the token limit stopped
    return tokens, logprobs, prompt_lens
