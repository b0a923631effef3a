"""Peak memory of one policy-gradient forward/backward: the lean path (rl/logprobs.py: completion
positions only, chunked, checkpointed) against the full path it replaced (logits over every position
and the whole vocabulary, then losses.token_logprobs), side by side, each in a fresh process.

    python bench/update_memory.py                      # tiny Qwen3, Qwen3's 151,936-token vocabulary
    python bench/update_memory.py --rows 8 --paths lean

Printed per path: peak RSS of the process (ru_maxrss), the RSS after building the model (the
baseline), their difference (the update's own memory), the forward/backward seconds, and the ratios
full / lean. The loss is DAPO's clipped surrogate with token-mean aggregation on fixed advantages; both
paths give the same loss (printed) and gradients (tests/test_lean_logprobs.py).
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


def one(path: str, args) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    from chorus.rl.logprobs import forward_logprobs
    from chorus.rl.losses import clipped_pg_loss, token_logprobs

    torch.manual_seed(0)
    torch.set_num_threads(1)
    cfg = Qwen3Config(vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=args.hidden // 2,
                      intermediate_size=2 * args.hidden, tie_word_embeddings=True)
    model = AutoModelForCausalLM.from_config(cfg).train()
    T = args.prompt + args.completion
    ids = torch.randint(0, args.vocab, (args.rows, T))
    attn = torch.ones_like(ids)
    mask = torch.zeros(args.rows, T)
    mask[:, args.prompt:] = 1
    adv = torch.linspace(-0.5, 1.0, args.rows)  # not symmetric: a loss of 0 would hide a difference
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t0 = time.perf_counter()
    if path == "lean":
        logp = forward_logprobs(model, ids, attn, mask, 1.0, args.chunk).logp
    else:
        logp = token_logprobs(model(input_ids=ids, attention_mask=attn).logits, ids)[0] * mask
    loss, _ = clipped_pg_loss(logp, logp.detach(), adv, mask, 0.2, 0.28, "token_mean", float(mask.sum()))
    loss.backward()
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"path": path, "peak_gib": peak / 2**30, "baseline_gib": base / 2**30, "update_gib": (peak - base) / 2**30,
            "seconds": seconds, "loss": float(loss)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--rows", type=int, default=2, help="rows per forward/backward (the full path needs ~2.6 GiB "
                                                          "each at the defaults)")
    ap.add_argument("--prompt", type=int, default=1200)
    ap.add_argument("--completion", type=int, default=48)
    ap.add_argument("--chunk", type=int, default=1024, help="trainer.logit_chunk")
    ap.add_argument("--paths", default="full,lean")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # the child process's path
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args)))
        return
    results = {}
    for path in args.paths.split(","):
        child = [a for a in (argv if argv is not None else sys.argv[1:])] + ["--one", path]
        p = subprocess.run([sys.executable, __file__, *child], capture_output=True, text=True)
        if p.returncode:
            print(f"{path}: failed ({p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode})")
            continue
        results[path] = json.loads(p.stdout.strip().splitlines()[-1])
    print(f"one DAPO forward/backward: {args.rows} rows x ({args.prompt} prompt + {args.completion} completion) "
          f"tokens, vocabulary {args.vocab}, hidden {args.hidden}, {args.layers} layers, fp32 on the CPU")
    for path, r in results.items():
        print(f"  {path}: peak RSS {r['peak_gib']:.3f} GiB (baseline {r['baseline_gib']:.3f}, the update's own "
              f"{r['update_gib']:.3f}), {r['seconds']:.2f} s, loss {r['loss']:.6f}")
    if {"full", "lean"} <= results.keys():
        f, lean = results["full"], results["lean"]
        print(f"  full / lean: the update's own memory {f['update_gib'] / max(lean['update_gib'], 1e-9):.1f}x, "
              f"peak RSS {f['peak_gib'] / lean['peak_gib']:.1f}x, time {f['seconds'] / lean['seconds']:.1f}x")


if __name__ == "__main__":
    main()
