"""Seconds per sample of the served-model path (policy.engine=openai) against in-process generation.

    python bench/served_overhead.py [--size xs] [--tasks 5] [--samples 4] [--max-new-tokens 32]
        [--concurrency 4] [--server-threads 1]

Same tiny model, task prompts (format vectors, as rendered by the direct protocol), sampling settings
and batching (the direct protocol's 4 tasks per engine call), side by side in one run:
  a) engine=hf: the model in this process, each call one batched `generate` (policy.threads=1);
  b) engine=openai through a local `transformers serve` on a fresh completion cache: one request per
     sample, --concurrency in flight (policy.api_concurrency), the server given --server-threads
     torch threads (1 matches a);
  c) engine=openai again on the now-warm cache (a resumed run): no request is sent.
Only generation is timed (simulation is the same for every engine); model loading, server start and
one warm-up call per path are not. Completion tokens differ between a and b: both sample, from
different random streams. Needs the serving extra (fastapi, uvicorn, openai).
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chorus.policy.engines import HFEngine, SamplingParams  # noqa: E402
from chorus.policy.models import load_model  # noqa: E402
from chorus.policy.openai_engine import CompletionCache, EndpointConf, OpenAIEngine  # noqa: E402
from chorus.policy.prompts import render_prompt  # noqa: E402
from chorus.policy.tiny import build_tiny  # noqa: E402
from chorus.tasks import load_tasks  # noqa: E402

BATCH_TASKS = 4  # chorus.protocol.direct's default
# The tiny model's generation_config does not sample; without this `transformers serve` decodes greedily.
SAMPLE = {"generation_config": '{"do_sample": true}'}


def serve(model: Path, threads: int, log: Path) -> tuple[subprocess.Popen, str, float]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    with open(log, "w") as f:
        proc = subprocess.Popen(["transformers", "serve", "--host", "127.0.0.1", "--port", str(port), str(model)],
                                stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    while time.monotonic() - t0 < 120:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return proc, f"http://127.0.0.1:{port}/v1", time.monotonic() - t0
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    sys.exit(f"transformers serve did not come up (see {log}); install the serving extra: pip install -e .[serving]")


def timed(engine, prompts: list[str], n: int, params: SamplingParams) -> tuple[float, int]:
    """Seconds to generate n samples of every prompt in direct-protocol batches, and completion tokens."""
    t0, tokens = time.monotonic(), 0
    for start in range(0, len(prompts), BATCH_TASKS):
        for samples in engine.generate(prompts[start:start + BATCH_TASKS], n=n, params=params):
            tokens += sum(g.meta.get("completion_tokens", len(g.token_ids)) for g in samples)
    return time.monotonic() - t0, tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="xs")
    ap.add_argument("--tasks", type=int, default=5)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--server-threads", type=int, default=1)
    args = ap.parse_args()
    path = build_tiny(args.size)
    model, tok = load_model("tiny", path=str(path), size=args.size)
    families = len(load_tasks("generated", per_family=1))
    tasks = load_tasks("generated", per_family=-(-args.tasks // families))[:args.tasks]
    prompts = [render_prompt(t, "vectors", tok, 3072).text for t in tasks]
    params = SamplingParams(max_new_tokens=args.max_new_tokens, seed=0)
    n_total = len(prompts) * args.samples
    work = Path(tempfile.mkdtemp(prefix="chorus-served-"))

    hf = HFEngine(model, tok, threads=1)
    hf.generate(prompts[:1], n=1, params=SamplingParams(max_new_tokens=2))  # warm-up
    results = {"a) hf in-process": timed(hf, prompts, args.samples, params)}

    server, url, start_s = serve(path, args.server_threads, work / "serve.log")
    try:
        conf = EndpointConf(url, str(path), concurrency=args.concurrency, extra_body=SAMPLE)
        OpenAIEngine(conf).generate(["warm-up"], n=1, params=SamplingParams(max_new_tokens=2))  # loads the model
        cold = OpenAIEngine(conf, CompletionCache(work / "completions.sqlite"))
        results["b) openai, cold cache"] = timed(cold, prompts, args.samples, params)
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    warm = OpenAIEngine(conf, CompletionCache(work / "completions.sqlite"))  # the server is gone: cache only
    results["c) openai, warm cache"] = timed(warm, prompts, args.samples, params)

    print(f"{len(prompts)} tasks x {args.samples} samples, max_new_tokens={args.max_new_tokens}, tiny-{args.size}, "
          f"api_concurrency={args.concurrency}, server threads={args.server_threads}; "
          f"server start {start_s:.1f} s (not counted); requests: cold {cold.http_calls}, warm {warm.http_calls}")
    print("| path | s/sample | completion tokens | ms/token |")
    print("|---|---|---|---|")
    for name, (secs, tokens) in results.items():
        print(f"| {name} | {secs / n_total:.4f} | {tokens} | {1000 * secs / max(tokens, 1):.2f} |")
    base = results["a) hf in-process"][0]
    print(f"ratio b/a={results['b) openai, cold cache'][0] / base:.2f} c/a={results['c) openai, warm cache'][0] / base:.4f}")


if __name__ == "__main__":
    main()
