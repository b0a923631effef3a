"""One RL rollout iteration outside the training step: prompts -> group samples -> simulator ->
rewards -> advantages -> (dynamic sampling with refill) -> padded tensors for the update.

Generation runs a few prompts at a time; each group goes to the simulator pool as soon as its
samples are done (the HF engine reports each prompt's group as its rows finish, while the others
still decode), so simulation overlaps generation within a generate call and across calls."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from ..policy.engines import SamplingParams
from ..policy.parsing import parse_completion
from ..policy.prompts import render_prompt
from ..protocol.direct import submit_scoring
from ..sim import SimConfig
from ..sim.pool import settled
from .advantages import ADVANTAGES
from .algos import RLAlgo
from .rewards import RewardConfig, reward, shaped
from .dynamic_sampling import dynamic_sample, reward_std


@dataclass
class RolloutBatch:
    input_ids: torch.Tensor  # [B, T] prompt + completion, right-padded
    attention_mask: torch.Tensor
    completion_mask: torch.Tensor  # 1 on completion tokens
    # [B, T] the engine's sampling log-probs on completion positions; the RL module replaces them with
    # its own forward pass at the sampling temperature before the update (RLModule._recompute_old_logprobs)
    old_logprobs: torch.Tensor
    advantages: torch.Tensor  # [B]
    rows: list[dict]  # one per sample: task, reward, status, coverage, lengths
    stats: dict = field(default_factory=dict)
    engine_logprobs: torch.Tensor | None = None  # [B, T] the engine's, kept when the trainer's replace them


@dataclass
class RolloutSpec:
    """Everything a rollout needs besides the policy and the tasks (plain values)."""
    algo: RLAlgo
    fmt: str
    group_size: int
    params: SamplingParams
    sim: SimConfig
    rewards: RewardConfig = RewardConfig()
    max_prompt_tokens: int = 3072
    prompts_per_generate: int = 4


def sample_groups(tasks, engine, tokenizer, pool, spec: RolloutSpec, seed: int) -> tuple[list[list[dict]], dict]:
    """G samples per task, scored; returns the groups and timings (generation, simulation wait)."""
    t_gen, pending = 0.0, []
    for start in range(0, len(tasks), spec.prompts_per_generate):
        chunk = tasks[start:start + spec.prompts_per_generate]
        prompts = [render_prompt(t, spec.fmt, tokenizer, spec.max_prompt_tokens) for t in chunk]
        t0 = time.monotonic()
        submitted: dict[int, tuple] = {}

        def score(i: int, group) -> None:  # to the simulator pool now, while the other prompts decode
            submitted[i] = (chunk[i], prompts[i], group, submit_scoring(pool, spec.fmt, {}, chunk[i], group, spec.sim))

        params = SamplingParams(**{**spec.params.__dict__, "seed": seed + start})
        if getattr(engine, "streams_groups", False):
            engine.generate([p.text for p in prompts], n=spec.group_size, params=params, on_group=score)
        else:  # an engine that returns the batch at once (vLLM): its groups go to the pool then
            for i, group in enumerate(engine.generate([p.text for p in prompts], n=spec.group_size, params=params)):
                score(i, group)
        t_gen += time.monotonic() - t0
        pending += [submitted[i] for i in range(len(chunk))]  # the tasks' order, whatever order they finished in
    t0 = time.monotonic()
    groups = []
    for t, p, group, futs in pending:
        prompt_ids = tokenizer(p.text, add_special_tokens=False)["input_ids"]  # once per task, shared by its group
        samples = []
        for g, f in zip(group, futs):
            r = settled(f)  # a dead worker is harness_error for this sample, not an aborted step
            value = shaped(reward(r.status, r.overall, r.passed(t.target), spec.rewards), len(g.token_ids),
                           spec.params.max_new_tokens, spec.algo.overlong_buffer)
            s = {"task": t, "prompt_ids": prompt_ids, "gen": g, "result": r, "reward": value}
            s["row"] = _row(s, spec.fmt)
            samples.append(s)
        groups.append(samples)
    return groups, {"generation_s": t_gen, "simulation_s": time.monotonic() - t0}


def collect(draw: Callable[[int], list], engine, tokenizer, pool, spec: RolloutSpec, prompts_per_step: int,
            seed: int = 0, after_generation: Callable[[], None] = lambda: None) -> RolloutBatch:
    """One rollout iteration: `draw(k)` gives the next k tasks (the sampler owns the data position);
    `after_generation()` runs once the engine has drawn its last sample (a vLLM engine sleeps)."""
    algo, timing = spec.algo, {"generation_s": 0.0, "simulation_s": 0.0}
    calls = 0

    def sample(k: int) -> list[list[dict]]:
        nonlocal calls
        groups, t = sample_groups(draw(k), engine, tokenizer, pool, spec, seed + 7919 * calls)
        calls += 1
        for key in timing:
            timing[key] += t[key]
        return groups

    groups = sample(prompts_per_step)
    seen = list(groups)
    if algo.dynamic_sampling:
        def refill(k):
            more = sample(k)
            seen.extend(more)
            return more
        groups, ds = dynamic_sample(groups, lambda grp: [s["reward"] for s in grp], want=prompts_per_step,
                                    refill=refill, std_threshold=algo.std_threshold, max_refills=algo.max_refills)
    else:
        ds = {"zero_std_fraction": _zero_std_fraction(groups, algo.std_threshold), "refills": 0}
    after_generation()
    rows, seqs = [], []
    for grp in groups:
        for s, a in zip(grp, ADVANTAGES[algo.advantage]([s["reward"] for s in grp])):
            seqs.append((s["prompt_ids"], s["gen"].token_ids, s["gen"].logprobs, a))
            rows.append({**s["row"], "advantage": a})
    sampled = [s["row"] for grp in seen for s in grp]  # stats describe every sample drawn
    stats = {**sample_stats(sampled), "zero_std_fraction": ds["zero_std_fraction"], "refills": ds["refills"],
             "groups_kept": len(groups), "samples_trained": len(rows), **timing}
    return RolloutBatch(*pad_sequences(seqs, tokenizer.pad_token_id), rows=rows, stats=stats)


def _zero_std_fraction(groups, threshold: float) -> float:
    return sum(reward_std([s["reward"] for s in g]) <= threshold for g in groups) / max(1, len(groups))


def _row(s: dict, fmt: str) -> dict:
    """The rollout-table row of one sample (its advantage is added once it is known)."""
    r, g = s["result"], s["gen"]
    return {"task_id": s["task"].id, "reward": s["reward"], "advantage": None, "status": r.status,
            "overall": r.overall, "passed": r.passed(s["task"].target), "completion_tokens": len(g.token_ids),
            "finish_reason": g.finish_reason, "parse_status": parse_completion(g.text, fmt).status, "text": g.text}


def sample_stats(rows: list[dict]) -> dict:
    n = max(1, len(rows))
    rewards = [r["reward"] for r in rows if r["reward"] is not None]
    texts = [r["text"] for r in rows]
    return {"reward_mean": sum(rewards) / len(rewards) if rewards else 0.0, "reward_std": reward_std(rewards),
            "pass_rate": sum(r["passed"] for r in rows) / n,
            "compile_rate": sum(r["status"] == "ok" for r in rows) / n,
            # Never rewarded or penalised, so they must at least be seen: a rising rate means
            # chorus (or a task) is failing, or a policy found a way to look like chorus failing.
            "harness_error_rate": sum(r["status"] == "harness_error" for r in rows) / n,
            "rejected_rate": sum(r["status"] == "rejected" for r in rows) / n,
            "truncated_fraction": sum(r["finish_reason"] == "length" for r in rows) / n,
            "completion_len_mean": sum(r["completion_tokens"] for r in rows) / n,
            "completion_len_max": max((r["completion_tokens"] for r in rows), default=0),
            "distinct_ratio": len(set(texts)) / n, "samples": len(rows)}


def pad_sequences(seqs, pad_id: int):
    """(prompt ids, completion ids, completion log-probs, advantage) per sample -> right-padded tensors."""
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
