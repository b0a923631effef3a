"""Tiny-model sampling throughput as the pipeline samples, before and after issue 26, side by side.

    python bench/sampling_throughput.py [--model PATH] [--prompts 16] [--samples 4 16] [--threads 2] [--rounds 3]

The hf engine on the `s` tiny model (or a checkpoint of it, e.g. a pipeline's sft/stage1/hf: a trained
model stops at its closing fence, an untrained one runs every row to the token limit), prompts of
generated tasks in the vectors format (max_prompt_tokens 512), at most 192 new tokens, T=0.5, on
`--threads` CPU threads. Three ways take turns over the rounds (a new seed each round; samples/s is
the median over rounds), each sampling all `--prompts` prompts:
  - before: generation=plain (transformers' dynamic cache), 4 prompts per generate call (the old
    rl.prompts_per_generate, which the tiny preset used);
  - shared: generation=shared (policy/hf_generation.py), 4 prompts per call;
  - after: generation=shared, 16 prompts per call (the tiny preset's rl.prompts_per_generate).
Also checks, on the same prompts, whether plain and shared give the same tokens, greedy and sampled
with one seed, and how far their log-probs differ. Prints `sampling_speedup=<x>` (after over before at
4 samples per prompt, the tiny preset's group size and held-out samples).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chorus.policy.engines import HFEngine, SamplingParams  # noqa: E402
from chorus.policy.models import load_model  # noqa: E402
from chorus.policy.prompts import render_prompt  # noqa: E402
from chorus.tasks import load_tasks  # noqa: E402

MODES = ("plain", "shared")
WAYS = {"before": ("plain", 4), "shared": ("shared", 4), "after": ("shared", 16)}  # (mode, prompts per call)


def rows(out) -> list:
    return [g for per_prompt in out for g in per_prompt]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="a checkpoint directory (default: the tiny s model, untrained)")
    ap.add_argument("--prompts", type=int, default=16, help="prompts sampled per measurement")
    ap.add_argument("--samples", type=int, nargs="+", default=[4, 16])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=192)
    args = ap.parse_args()
    model, tok = load_model("tiny", path=args.model, size="s")
    tasks = load_tasks("generated", per_family=-(-args.prompts // 5))[: args.prompts]
    prompts = [render_prompt(t, "vectors", tok, 512).text for t in tasks]
    engines = {m: HFEngine(model, tok, threads=args.threads, generation=m) for m in MODES}
    lengths = [len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts]
    print(f"model: {args.model or 'tiny s (untrained)'}; {len(prompts)} prompts of {lengths} tokens; "
          f"{args.threads} threads; <= {args.max_new_tokens} new tokens, T=0.5")
    for e in engines.values():  # first calls pay one-time costs
        e.generate(prompts[:1], n=2, params=SamplingParams(max_new_tokens=8, temperature=0.5))

    for temperature, label in ((0.0, "greedy"), (0.5, "sampled, seed 0")):
        params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=temperature, seed=0)
        a, b = (rows(engines[m].generate(prompts[:4], n=4, params=params)) for m in MODES)
        same = sum(x.token_ids == y.token_ids for x, y in zip(a, b))
        diff = max((abs(u - v) for x, y in zip(a, b) if x.token_ids == y.token_ids
                    for u, v in zip(x.logprobs, y.logprobs)), default=0.0)
        print(f"{label}: {same}/{len(a)} rows identical between plain and shared; "
              f"largest log-prob difference on them {diff:.2e}")

    speedup = {}
    for n in args.samples:
        rates = {w: [] for w in WAYS}
        tokens = []
        for r in range(args.rounds):
            for w in (list(WAYS) if r % 2 == 0 else list(WAYS)[::-1]):
                mode, per_call = WAYS[w]
                params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=0.5, seed=100 + r)
                t0, out = time.monotonic(), []
                for start in range(0, len(prompts), per_call):
                    out += rows(engines[mode].generate(prompts[start:start + per_call], n=n, params=params))
                rates[w].append(len(out) / (time.monotonic() - t0))
                tokens.append(sum(len(g.token_ids) for g in out) / len(out))
        med = {w: statistics.median(rates[w]) for w in WAYS}
        speedup[n] = med["after"] / med["before"]
        print(f"{n} samples/prompt ({statistics.mean(tokens):.0f} tokens/sample): "
              + ", ".join(f"{w} {med[w]:.2f}" for w in WAYS) + " samples/s; "
              f"shared/before {med['shared'] / med['before']:.2f}, after/before {speedup[n]:.2f}")
    print(f"sampling_speedup={speedup.get(4, next(iter(speedup.values()))):.2f}")


if __name__ == "__main__":
    main()
