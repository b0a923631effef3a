"""A stage's teacher candidates against a served model: samples scored per minute, and how much of the
simulation hides behind the teacher's generation, measured side by side in one run.

    python bench/teacher_candidates.py [--samples 8] [--workers 2]

The teacher is the xs tiny model taught (60 SFT steps, about half a minute here) to answer every
prompt of the shipped example designs with a random burst, three times in four, or a broken line;
`transformers serve` serves it on localhost. On the example designs (ingested into a fresh cache),
with no request cache, the bench times:
  - overlapped: sft/teacher.sample_teacher as a stage runs it (each chunk's samples scored by the
    simulator pool while the next chunk generates), repairs off;
  - generation alone (the same requests) and scoring alone (the same completions), one after the other.
Prints `samples_scored_per_min` (overlapped) and `overlap_speedup` = (generation + scoring) / overlapped.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="chorus-bench-teacher-"))
    os.environ["CHORUS_CACHE_DIR"] = str(work / "cache")
    from transformers import AutoTokenizer

    from chorus.policy.openai_engine import CompletionCache, EndpointConf, OpenAIEngine
    from chorus.policy.prompts import fit_messages
    from chorus.policy.tiny import build_tiny
    from chorus.protocol.direct import parsed_jobs
    from chorus.sft.data import Example, answer
    from chorus.sft.run import train_sft
    from chorus.sft.teacher import sample_teacher
    from chorus.sim.config import SimConfig
    from chorus.sim.pool import make_pool
    from chorus.tasks.ingest import ingest
    from helpers import PROMPT, Server

    server = None
    try:
        sim = SimConfig(cache=False)
        tasks = ingest(ROOT / "examples" / "designs", sim, workers=a.workers).tasks
        tiny = build_tiny("xs", seed=0)
        tok, examples = AutoTokenizer.from_pretrained(tiny), []
        for t in tasks:
            msgs = fit_messages(t, "vectors", tok, PROMPT)[0]
            examples += [Example(t.id, "validated", msgs, answer(t, "vectors", "rst x2\nin0=? x400"), 0.0)] * 3
            examples.append(Example(t.id, "validated", msgs, answer(t, "vectors", "rst x2\nin0="), 0.0))
        teacher_dir = train_sft(str(tiny), examples, work / "teacher", steps=60, batch_size=8, lr=3e-3,
                                warmup_steps=5)["checkpoint"]
        server = Server(Path(teacher_dir), work)
        server.start()
        engine = OpenAIEngine(EndpointConf(server.url, teacher_dir, concurrency=4,
                                           extra_body={"generation_config": '{"do_sample": true}'}),
                              CompletionCache(None))
        teacher = {"samples": a.samples, "repair": False, "max_new_tokens": 48, "temperature": 1.0, "top_p": 1.0,
                   "top_k": 0, "seed": 0, "max_prompt_tokens": PROMPT}
        with make_pool(a.workers) as pool:
            t0 = time.monotonic()
            scored = sample_teacher(tasks, engine, tok, teacher, "vectors", sim, executor=pool)
            overlapped = time.monotonic() - t0
            prompts = [fit_messages(t, "vectors", tok, PROMPT)[1].text for t in tasks]
            from chorus.policy.engines import SamplingParams

            t0 = time.monotonic()
            gens = [g for start in range(0, len(tasks), 4) for g in engine.generate(
                prompts[start:start + 4], n=a.samples, params=SamplingParams(max_new_tokens=48, seed=start))]
            generation = time.monotonic() - t0
            t0 = time.monotonic()
            futures = [pool.submit(parsed_jobs, "vectors", {}, t, g, sim) for t, g in zip(tasks, gens)]
            [f.result() for f in futures]
            scoring = time.monotonic() - t0
        n = len(scored)
        ok = sum(s.result.status == "ok" for s in scored)
        print(f"tasks={len(tasks)} samples={n} ran_ok={ok} workers={a.workers} api_concurrency=4")
        print(f"overlapped_s={overlapped:.1f} generation_alone_s={generation:.1f} scoring_alone_s={scoring:.1f}")
        print(f"samples_scored_per_min={60 * n / overlapped:.0f}")
        print(f"overlap_speedup={(generation + scoring) / overlapped:.2f}")
    finally:
        if server is not None:
            server.kill()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
