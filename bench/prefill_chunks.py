"""One prefill forward over every row (before) against rows in chunks of at most
hf_generation.PREFILL_TOKENS tokens (after), side by side: peak memory and seconds.

    python bench/prefill_chunks.py [--rows 512] [--tokens 900] [--threads 1]

An agentic round's later turns give every sample its own conversation (the study's: 512 rows a
generate call, about 1,000 tokens each), so hf_generation.shared_prefix_cache prefills rows x tokens at
once. This runs it on the `s` tiny model's architecture (random weights: the cost does not depend on
them), half the rows left-padded to a third of the width, each way in its own process so that the
peak resident memory (ru_maxrss) is that way's alone, and checks that both caches hold the same keys.
Prints `peak_ratio=<before/after>` and `time_ratio=<before/after>`.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def one_way(rows: int, tokens: int, threads: int, chunked: bool) -> dict:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from chorus.policy.hf_generation import PREFILL_TOKENS, shared_prefix_cache
    from chorus.policy.tiny import PRESETS

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = Qwen3ForCausalLM._from_config(Qwen3Config(**PRESETS["s"], max_position_embeddings=4096),
                                          attn_implementation="sdpa").eval()
    ids = torch.randint(5, PRESETS["s"]["vocab_size"], (rows, tokens))
    mask = torch.ones_like(ids)
    mask[: rows // 2, : tokens // 3] = 0
    start = time.perf_counter()
    with torch.no_grad():
        cache = shared_prefix_cache(model, ids, mask, 1, max_tokens=PREFILL_TOKENS if chunked else rows * tokens)
    seconds = time.perf_counter() - start
    probe = cache.layers[-1].keys[:: max(1, rows // 8), :, -4:].flatten()[:64].tolist()
    return {"seconds": seconds, "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, "probe": probe}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=512)
    ap.add_argument("--tokens", type=int, default=900)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--way", choices=["before", "after"], help=argparse.SUPPRESS)  # the child's
    a = ap.parse_args()
    if a.way:
        print(json.dumps(one_way(a.rows, a.tokens, a.threads, a.way == "after")))
        return
    out = {}
    for way in ("before", "after"):
        p = subprocess.run([sys.executable, __file__, f"--rows={a.rows}", f"--tokens={a.tokens}",
                            f"--threads={a.threads}", f"--way={way}"], capture_output=True, text=True, check=True)
        out[way] = json.loads(p.stdout.strip().splitlines()[-1])
        print(f"{way:6s} {a.rows} rows x {a.tokens} tokens: {out[way]['seconds']:.1f} s, peak {out[way]['peak_gb']:.2f} GB")
    diff = max(abs(x - y) for x, y in zip(out["before"]["probe"], out["after"]["probe"]))
    print(f"max |key difference| on probed positions: {diff:.2e}")
    print(f"peak_ratio={out['before']['peak_gb'] / out['after']['peak_gb']:.2f} "
          f"time_ratio={out['before']['seconds'] / out['after']['seconds']:.2f}")


if __name__ == "__main__":
    main()
