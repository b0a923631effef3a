"""The tiny base's pretraining speed (chorus.policy.pretrain), side by side in one run: float32 against
bfloat16 autocast on the CPU, at 1 and 2 torch threads, and what 600 steps (pipeline=staged's
model.pretrain_steps) would take at each.

    python bench/pretrain.py                 # tiny-s, 20 steps per arm
    python bench/pretrain.py --size s --steps 40

Each arm builds the same randomly initialised model and runs the same batches (random token blocks
of the preset's shape: a step costs the same whatever the tokens) through pretrain(); printed: seconds
per step (the median of the arm's steps after the first), the ratio to float32 at the same threads,
the projected minutes for 600 steps, and the last loss (the arms see the same data: a bf16 loss far
from the fp32 one would say the speed is bought with accuracy).
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def arm(size: str, steps: int, threads: int, bf16: bool) -> tuple[float, float]:
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    from chorus.policy.pretrain import PretrainSpec, pretrain
    from chorus.policy.tiny import PRESETS

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(Qwen3Config(**PRESETS[size], tie_word_embeddings=True,
                                                         attn_implementation="sdpa"))
    spec = PretrainSpec(steps=steps)
    blocks = torch.randint(0, PRESETS[size]["vocab_size"], (256, spec.seq_len), generator=torch.Generator().manual_seed(1))
    stamps = []
    ctx = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    with ctx:
        losses = pretrain(model, blocks, spec, on_step=lambda done, total: stamps.append(time.perf_counter()))
    per_step = statistics.median(b - a for a, b in zip(stamps, stamps[1:]))
    return per_step, losses[-1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="s")
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    print(f"tiny-{args.size}, {args.steps} steps per arm, batch 16 x 256 tokens")
    for threads in (1, 2):
        base = None
        for bf16 in (False, True):
            s, loss = arm(args.size, args.steps, threads, bf16)
            base = base or s
            print(f"threads {threads} {'bf16 autocast' if bf16 else 'float32      '}: {s:.3f} s/step "
                  f"(x{base / s:.2f} vs float32), 600 steps ~ {600 * s / 60:.1f} min, last loss {loss:.3f}")


if __name__ == "__main__":
    main()
