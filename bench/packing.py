"""Padded against packed update passes (rl/packing.py), side by side in one run: tokens computed and
seconds per update of a tiny Qwen3 on the CPU, for a batch of very unequal rows and one of equal rows.

    python bench/packing.py                            # sdpa (the project's default attention)
    python bench/packing.py --attn eager --repeats 5

An update here is what RLModule runs for one micro-batch: the old log-probs (no gradient), then the
policy's forward/backward of DAPO's clipped loss, through rl/logprobs.forward_logprobs with
trainer.pack_sequences false (padded) and true (packed), alternating, the median of --repeats each.
Printed per batch: tokens each path computes, seconds, the ratios padded / packed, the largest
log-prob difference between the paths, and what trainer.pack_sequences=null picks for that batch.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def model_for(args):
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    from chorus.policy.tiny import PRESETS

    torch.manual_seed(0)
    cfg = Qwen3Config(**PRESETS[args.size], tie_word_embeddings=True, max_position_embeddings=8192,
                      attn_implementation=args.attn)
    return AutoModelForCausalLM.from_config(cfg).train()


def rows(lengths: list[int], completion: int, vocab: int):
    """Right-padded rows of these lengths, each ending in up to `completion` completion tokens."""
    import torch

    g = torch.Generator().manual_seed(1)
    ids = torch.randint(4, vocab, (len(lengths), max(lengths)), generator=g)
    attn, mask = torch.zeros_like(ids), torch.zeros(ids.shape)
    for row, n in enumerate(lengths):
        attn[row, :n], mask[row, max(1, n - completion):n] = 1, 1
    return ids, attn, mask


def update(model, ids, attn, mask, pack: bool):
    """(seconds, log-probs): the old log-probs, then one DAPO forward/backward, as the module runs them."""
    import torch

    from chorus.rl.logprobs import forward_logprobs
    from chorus.rl.losses import clipped_pg_loss

    model.zero_grad(set_to_none=True)
    adv = torch.linspace(-0.5, 1.0, ids.size(0))
    t0 = time.perf_counter()
    with torch.no_grad():
        old = forward_logprobs(model, ids, attn, mask, pack=pack).logp
    logp = forward_logprobs(model, ids, attn, mask, with_entropy=True, pack=pack).logp
    loss, _ = clipped_pg_loss(logp, old, adv, mask, 0.2, 0.28, "token_mean", float(mask.sum()))
    loss.backward()
    return time.perf_counter() - t0, logp.detach()


def compare(model, name: str, lengths: list[int], args) -> None:
    from chorus.rl.packing import packed_tokens, padded_tokens, should_pack

    ids, attn, mask = rows(lengths, args.completion, model.config.vocab_size)
    update(model, ids, attn, mask, True)  # warm-up (and the once-per-model checks), not timed
    times = {False: [], True: []}
    logps = {}
    for _ in range(args.repeats):
        for pack in (False, True):  # alternating: drift in the machine's load falls on both paths alike
            seconds, logps[pack] = update(model, ids, attn, mask, pack)
            times[pack].append(seconds)
    padded, packed = statistics.median(times[False]), statistics.median(times[True])
    t_pad, t_pack = padded_tokens(lengths), packed_tokens(lengths)
    diff = float((logps[True] - logps[False]).abs().max())
    choice = "packed" if should_pack(model, lengths, None) else "padded"
    print(f"{name}: {len(lengths)} rows of {', '.join(map(str, lengths))} tokens")
    print(f"  padded: {t_pad} tokens, {padded:.2f} s per update")
    print(f"  packed: {t_pack} tokens, {packed:.2f} s per update")
    print(f"  padded / packed: tokens {t_pad / t_pack:.2f}x, time {padded / packed:.2f}x; "
          f"largest log-prob difference {diff:.1e}; trainer.pack_sequences=null: {choice}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="s", help="tiny preset (chorus.policy.tiny.PRESETS)")
    ap.add_argument("--attn", default="sdpa", help="attention implementation (sdpa, eager)")
    ap.add_argument("--unequal", default="1500,120,200,90,150,300,110,180", help="row lengths, very unequal")
    ap.add_argument("--equal", default="400,400,400,400", help="row lengths, equal")
    ap.add_argument("--completion", type=int, default=64, help="completion tokens at the end of each row")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    model = model_for(args)
    print(f"tiny Qwen3 '{args.size}' ({sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters), "
          f"{args.attn} attention, fp32 on the CPU, {args.threads} thread(s), median of {args.repeats}")
    for name in ("unequal", "equal"):
        lengths = [int(n) for n in getattr(args, name).split(",") if n.strip()]
        if lengths:
            compare(model, name, lengths, args)


if __name__ == "__main__":
    main()
