"""Wall time of one direct evaluation with and without generation/simulation overlap.

    python bench/overlap.py [--tasks-per-family N] [--samples K] [--format body] [--max-new-tokens T]

Same tiny model, tasks, samples and seeds in both runs (result cache off). With overlap, each
generated batch goes to the simulation pool at once while the next batch generates.

An untrained tiny model writes nothing that simulates, so by default (--valid) the model still
generates every sample (real generation cost) but its text is replaced by the task's reference
stimulus in the chosen format (real simulation cost). `--no-valid` scores the model's own text.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chorus.policy.engines import HFEngine, SamplingParams  # noqa: E402
from chorus.policy.models import load_model  # noqa: E402
from chorus.protocol.direct import run_direct  # noqa: E402
from chorus.sim import SimConfig  # noqa: E402
from chorus.stimulus.aliases import alias_map  # noqa: E402
from chorus.stimulus.formats import render  # noqa: E402
from chorus.stimulus.program import parse_vectors  # noqa: E402
from chorus.tasks import load_tasks  # noqa: E402


class ValidTextEngine:
    """Generates with the real engine, then swaps in a valid reference completion per prompt."""

    def __init__(self, engine, texts_by_prompt: dict[str, str]):
        self.engine, self.texts = engine, texts_by_prompt

    def generate(self, prompts, n=1, params=None):
        gens = self.engine.generate(prompts, n=n, params=params)
        for prompt, samples in zip(prompts, gens):
            for g in samples:
                g.text = self.texts[prompt]
        return gens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks-per-family", type=int, default=2)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--format", default="body")
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--size", default="s")
    ap.add_argument("--valid", action=argparse.BooleanOptionalAction, default=True)
    args = ap.parse_args()
    model, tok = load_model("tiny", size=args.size)
    tasks = load_tasks("generated", per_family=args.tasks_per_family)
    cfg = SimConfig(cache=False, cache_dir=tempfile.mkdtemp(prefix="chorus-overlap-"))
    params = SamplingParams(max_new_tokens=args.max_new_tokens, seed=0)
    engine = HFEngine(model, tok)
    if args.valid:
        from chorus.policy.prompts import render_prompt

        fence = {"testbench": "systemverilog", "body": "systemverilog", "vectors": "vectors", "cocotb": "python"}
        texts = {}
        for t in tasks:
            code = render(args.format, t, parse_vectors(t.meta["programs"]["medium"], alias_map(t)))
            texts[render_prompt(t, args.format, tok, 3072).text] = f"```{fence[args.format]}\n{code}```\n"
        engine = ValidTextEngine(engine, texts)
    run_direct(tasks[:1], engine, tok, args.format, 1, params, cfg, batch_tasks=2, progress=False)  # warm-up
    times = {}
    for overlap in (False, True):
        t0 = time.monotonic()
        rows = run_direct(tasks, engine, tok, args.format, args.samples, params, cfg, batch_tasks=2,
                          overlap=overlap, progress=False)
        times[overlap] = time.monotonic() - t0
        statuses = sorted({r["status"] for r in rows})
        print(f"overlap={overlap}: {times[overlap]:.1f} s for {len(rows)} samples ({statuses})")
    print(f"overlap_speedup={times[False] / times[True]:.2f}")


if __name__ == "__main__":
    main()
