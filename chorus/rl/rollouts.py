"""One RL rollout iteration outside the training step: prompts -> group samples -> simulator ->
rewards -> advantages -> (dynamic sampling) -> padded tensors for the update."""
from __future__ import annotations

import functools
import random
import time
from dataclasses import dataclass

import torch

from ..policy.engines import SamplingParams
from ..policy.parsing import parse_completion
from ..policy.prompts import render_prompt
from ..protocol.direct import parsed_job
from ..sim import SimConfig
from .advantages import ADVANTAGES
from .algos import RLAlgo
from .losses import overlong_penalty
from .rewards import RewardConfig, reward
from .sampling import dynamic_sample, reward_std


@dataclass
class RolloutBatch:
    input_ids: torch.Tensor  # [B, T] prompt + completion, right-padded
    attention_mask: torch.Tensor
    completion_mask: torch.Tensor  # 1 on completion tokens
    old_logprobs: torch.Tensor  # [B, T] sampling log-probs on completion positions
    advantages: torch.Tensor  # [B]
    rows: list[dict]  # one per sample: task, reward, status, coverage, lengths
    stats: dict


def collect(tasks, engine, tokenizer, pool, algo: RLAlgo, fmt: str, group_size: int, prompts_per_step: int,
            params: SamplingParams, sim: SimConfig, rcfg: RewardConfig, rng: random.Random,
            max_prompt_tokens: int = 3072) -> RolloutBatch:
    t0 = time.monotonic()
    chosen = rng.sample(list(tasks), min(prompts_per_step, len(tasks)))
    prompts = [render_prompt(t, fmt, tokenizer, max_prompt_tokens) for t in chosen]
    gens = engine.generate([p.text for p in prompts], n=group_size, params=params)
    t_gen = time.monotonic() - t0
    job = functools.partial(parsed_job, fmt, {})
    futures = [[pool.submit(job, t, g, sim) for g in group] for t, group in zip(chosen, gens)]
    groups = []
    for t, p, group, futs in zip(chosen, prompts, gens, futures):
        samples = []
        for g, f in zip(group, futs):
            r = f.result()
            value = reward(r.status, r.overall, r.passed(t.target), rcfg)
            if value is not None and algo.overlong_buffer:
                value += overlong_penalty(len(g.token_ids), params.max_new_tokens, algo.overlong_buffer)
            samples.append({"task": t, "prompt": p.text, "gen": g, "result": r, "reward": value})
        groups.append(samples)
    t_sim = time.monotonic() - t0 - t_gen
    if algo.dynamic_sampling:
        groups, ds = dynamic_sample(groups, lambda grp: [s["reward"] for s in grp], want=len(groups),
                                    refill=lambda k: [], std_threshold=algo.std_threshold, max_refills=0)
    else:
        ds = {"zero_std_fraction": sum(reward_std([s["reward"] for s in g]) <= algo.std_threshold
                                       for g in groups) / max(1, len(groups))}
    rows, seqs = [], []
    for grp in groups:
        advs = ADVANTAGES[algo.advantage]([s["reward"] for s in grp])
        for s, a in zip(grp, advs):
            prompt_ids = tokenizer(s["prompt"], add_special_tokens=False)["input_ids"]
            seqs.append((prompt_ids, s["gen"].token_ids, s["gen"].logprobs, a))
            r = s["result"]
            rows.append({"task_id": s["task"].id, "reward": s["reward"], "advantage": a, "status": r.status,
                         "overall": r.overall, "passed": r.passed(s["task"].target),
                         "completion_tokens": len(s["gen"].token_ids), "finish_reason": s["gen"].finish_reason,
                         "parse_status": parse_completion(s["gen"].text, fmt).status, "text": s["gen"].text})
    batch = _pad(seqs, tokenizer.pad_token_id)
    rewards = [r["reward"] for r in rows if r["reward"] is not None]
    texts = [r["text"] for r in rows]
    stats = {"reward_mean": sum(rewards) / len(rewards) if rewards else 0.0, "reward_std": reward_std(rewards),
             "pass_rate": sum(r["passed"] for r in rows) / max(1, len(rows)),
             "compile_rate": sum(r["status"] == "ok" for r in rows) / max(1, len(rows)),
             "truncated_fraction": sum(r["finish_reason"] == "length" for r in rows) / max(1, len(rows)),
             "completion_len_mean": sum(r["completion_tokens"] for r in rows) / max(1, len(rows)),
             "distinct_ratio": len(set(texts)) / max(1, len(texts)), "zero_std_fraction": ds["zero_std_fraction"],
             "generation_s": t_gen, "simulation_s": t_sim}
    return RolloutBatch(*batch, rows=rows, stats=stats)


def _pad(seqs, pad_id: int):
    width = max((len(p) + len(c) for p, c, _, _ in seqs), default=1)
    n = len(seqs)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    attn, comp = torch.zeros(n, width, dtype=torch.long), torch.zeros(n, width, dtype=torch.long)
    old = torch.zeros(n, width)
    adv = torch.zeros(n)
    for i, (p, c, lp, a) in enumerate(seqs):
        ids[i, :len(p) + len(c)] = torch.tensor(p + c, dtype=torch.long)
        attn[i, :len(p) + len(c)] = 1
        comp[i, len(p):len(p) + len(c)] = 1
        old[i, len(p):len(p) + len(c)] = torch.tensor(lp[:len(c)])
        adv[i] = a
    return ids, attn, comp, old, adv
