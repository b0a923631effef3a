"""chorus.evaluate throughput with the local pool vs Ray, measured side by side in one run.

    python bench/executor_throughput.py [--per-family N] [--samples S] [--format testbench] [--rounds R]
        [--workers W]

Each configuration runs the user's command, `python -m chorus.evaluate policy=random` on the same
generated tasks (N per family, S samples each, the result cache off), and is timed end to end
(process start, Ray start-up, every simulation):
  - local:       simulator.executor=local, a pool of W workers;
  - ray-started: simulator.executor=ray with no address, so the job starts a local Ray cluster;
  - ray-joined:  simulator.executor=ray on a cluster started before (`ray start --head --num-cpus W`),
                 what a user with a running cluster pays.
Each round gives every configuration a new policy.seed (new testbenches, so no build is answered by
ccache from an earlier configuration) and rotates their order so machine load hits them alike. An
untimed run first builds the one-time runtime objects. Prints a table of evaluations per second
(median over rounds) and `ray_joined_vs_local=<x>` (throughput ratio).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIGS = ("local", "ray-started", "ray-joined")


def evaluate(args, config: str, seed: int, out: Path, address: str | None, env: dict) -> tuple[float, int, int]:
    """(seconds, evaluations, evaluations that finished ok) of one chorus.evaluate run."""
    executor = "local" if config == "local" else "ray"
    cmd = [sys.executable, "-m", "chorus.evaluate", "progress=false", "tasks=generated",
           f"tasks.per_family={args.per_family}", f"format={args.format}", "policy=random", f"policy.seed={seed}",
           f"n_samples={args.samples}", "simulator.cache=false", f"simulator.workers={args.workers}",
           f"simulator.executor={executor}", f"hydra.run.dir={out}"]
    if config == "ray-joined":
        cmd.append(f"simulator.executor_address={address}")
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    took = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"{config}: chorus.evaluate failed: {p.stderr.strip().splitlines()[-1:]}")
    rows = [json.loads(line) for line in (out / "per_task.jsonl").read_text().splitlines()]
    return took, len(rows), sum(r["status"] == "ok" for r in rows)


def start_cluster(workers: int, env: dict) -> str:
    """A head node on this machine; joined as "auto", which also finds the cluster's auth token."""
    subprocess.run(["ray", "start", "--head", f"--port={6400 + os.getpid() % 1000}", f"--num-cpus={workers}",
                    "--include-dashboard=false", "--disable-usage-stats"], check=True, capture_output=True, env=env)
    return "auto"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-family", type=int, default=2, help="generated tasks per family (5 families)")
    ap.add_argument("--samples", type=int, default=2, help="random programs per task")
    ap.add_argument("--format", default="testbench", help="stimulus format (testbench: one build per sample)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2, help="local pool size and the joined cluster's CPUs")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="chorus-bench-executor-"))
    env = dict(os.environ, CHORUS_CACHE_DIR=str(work / "cache"))
    evaluate(args, "local", 10_000, work / "warmup", None, env)  # one-time runtime objects, harnesses
    address = start_cluster(args.workers, env)
    times: dict[str, list[float]] = {c: [] for c in CONFIGS}
    try:
        for rnd in range(args.rounds):
            order = CONFIGS[rnd % 3:] + CONFIGS[:rnd % 3]
            for i, config in enumerate(order):
                seed = rnd * len(CONFIGS) + i
                took, n, ok = evaluate(args, config, seed, work / f"{config}-{rnd}", address, env)
                times[config].append(n / took)
                print(f"round {rnd} {config:11s}: {n} evaluations ({ok} ok) in {took:.1f} s", flush=True)
    finally:
        subprocess.run(["ray", "stop", "--force"], capture_output=True, env=env)
    rate = {c: statistics.median(v) for c, v in times.items()}
    print(f"\n{args.per_family * 5} tasks x {args.samples} samples, format {args.format}, {args.workers} workers, "
          f"result cache off, median of {args.rounds} rounds")
    print("| executor | evaluations/s | vs local |\n|---|---|---|")
    for c in CONFIGS:
        print(f"| {c} | {rate[c]:.2f} | {rate[c] / rate['local']:.2f} |")
    print(f"ray_joined_vs_local={rate['ray-joined'] / rate['local']:.2f}")


if __name__ == "__main__":
    main()
