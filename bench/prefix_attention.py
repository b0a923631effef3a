"""generation=shared with each prompt's prefix copied to its samples (before) against kept once
(policy/prefix_attention.py, after), side by side.

    python bench/prefix_attention.py [--model PATH] [--prompts 16] [--samples 4 16] [--threads 1] [--rounds 3]

The hf engine's decode loop (policy/shared_decode.py) on the `s` tiny model (or a checkpoint of it,
e.g. a pipeline's rl/stage1/hf: a trained model stops at its closing fence, an untrained one runs to
the token limit), prompts of generated tasks in the vectors format (max_prompt_tokens 512, about 400
tokens), at most 192 new tokens, T=0.5, `--threads` CPU threads (a pipeline job has 1). Both ways
sample all prompts in one call, taking turns over the rounds with a new seed each round; samples/s is
the median over rounds. Also checks that both give the same tokens on the same seed (greedy and
sampled) and how far their log-probs differ. Prints `prefix_speedup=<x>` at 16 samples a prompt (the
held-out evaluation's) and the peak memory each way allocates for its cache (tracemalloc does not see
torch's allocations, so it is computed from the cache shapes).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from chorus.policy.engines import SamplingParams  # noqa: E402
from chorus.policy.models import load_model  # noqa: E402
from chorus.policy.prompts import render_prompt  # noqa: E402
from chorus.policy.shared_decode import shared_decode  # noqa: E402
from chorus.tasks import load_tasks  # noqa: E402

WAYS = {"copied": False, "once": True}  # prefix_once


def cache_mib(model, prompts: int, n: int, prompt_len: int, new: int, once: bool) -> float:
    """Keys and values at their largest: prefix per prompt (once) or per row (copied), plus the rows' own."""
    c = model.config
    per_position = 2 * c.num_hidden_layers * c.num_key_value_heads * c.head_dim * 4  # fp32 k and v
    prefix_rows = prompts if once else prompts * n
    return per_position * (prefix_rows * prompt_len + prompts * n * new) / 2 ** 20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="a checkpoint directory (default: the tiny s model)")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--samples", type=int, nargs="+", default=[4, 16])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=192)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model, tok = load_model("tiny", path=args.model, size="s")
    tok.padding_side = "left"
    tasks = load_tasks("generated", per_family=-(-args.prompts // 5), difficulty="mixed")[: args.prompts]
    prompts = [render_prompt(t, "vectors", tok, 512).text for t in tasks]
    lengths = [len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts]
    print(f"model: {args.model or 'tiny s'}; {len(prompts)} prompts of {min(lengths)}-{max(lengths)} tokens; "
          f"{args.threads} threads; <= {args.max_new_tokens} new tokens, T=0.5")

    def run(once: bool, n: int, params: SamplingParams):
        return shared_decode(model, tok, prompts, n, params, (tok.eos_token_id,), prefix_once=once)

    for temperature, label in ((0.0, "greedy"), (0.5, "sampled, seed 0")):
        params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=temperature, seed=0)
        (ta, la, _), (tb, lb, _) = (run(once, 4, params) for once in WAYS.values())
        same = sum(x == y for x, y in zip(ta, tb))
        diff = max((abs(u - v) for x, y, p, q in zip(ta, tb, la, lb) if x == y for u, v in zip(p, q)), default=0.0)
        print(f"{label}: {same}/{len(ta)} rows identical; largest log-prob difference on them {diff:.2e}")

    speedup = {}
    for n in args.samples:
        rates: dict = {w: [] for w in WAYS}
        lengths_out = []
        for r in range(args.rounds):
            for w in (list(WAYS) if r % 2 == 0 else list(WAYS)[::-1]):
                params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=0.5, seed=100 + r)
                t0 = time.monotonic()
                tokens, _, _ = run(WAYS[w], n, params)
                rates[w].append(len(tokens) / (time.monotonic() - t0))
                lengths_out.append(statistics.mean(map(len, tokens)))
        med = {w: statistics.median(rates[w]) for w in WAYS}
        speedup[n] = med["once"] / med["copied"]
        mib = {w: cache_mib(model, len(prompts), n, max(lengths), args.max_new_tokens, once) for w, once in WAYS.items()}
        print(f"{n} samples/prompt ({statistics.mean(lengths_out):.0f} tokens/sample): "
              + ", ".join(f"{w} {med[w]:.1f} samples/s (cache <= {mib[w]:.0f} MiB)" for w in WAYS)
              + f"; once/copied {speedup[n]:.2f}")
    print(f"prefix_speedup={speedup.get(16, next(iter(speedup.values()))):.2f}")


if __name__ == "__main__":
    main()
