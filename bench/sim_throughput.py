"""Simulator throughput, measured side by side in one run on the same machine.

    python bench/sim_throughput.py [--tasks N] [--naive-tasks K] [--workers W] [--per-task S]

Part 1, whole testbenches (bundled reference testbenches):
  - new-testbench latency (no result cache) per evaluation, fast path: median and p90;
  - the same for a naive build (`--coverage`, default optimisation, no ccache, no prebuilt
    runtime objects, no precompiled header) on the first K tasks;
  - evaluations per second with a worker pool: cold (new testbenches) and warm (cache hits).
  Each run gets a unique comment appended to its testbench so no cache can answer it.
  Prints `speedup_vs_naive=<x>` (median naive / median fast on the same tasks).
Part 2, stimulus formats on generated tasks: evaluations per second with a worker pool for
  testbench, body, vectors and cocotb, each scoring S distinct random programs per task (result
  cache off; the per-design harnesses of vectors/cocotb are built first and timed apart).
Part 3, OS isolation: the same new testbenches built and run with simulator.isolation=required
  and =off, alternating task by task so machine load hits both alike; prints
  `isolation_overhead=<x>` (median isolated / median unisolated new-testbench time).
The last line is `vectors_speedup=<x>` (vectors evals/s over testbench evals/s).
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chorus.sim import SimConfig, simulate  # noqa: E402
from chorus.sim.build import make_vars, verilator_flags  # noqa: E402
from chorus.sim.pool import evaluate_many  # noqa: E402
from chorus.sim.runtime import ensure_runtime  # noqa: E402
from chorus.sim.toolchain import find_toolchain  # noqa: E402
from chorus.stimulus.aliases import alias_map  # noqa: E402
from chorus.stimulus.formats import FORMATS, render, score  # noqa: E402
from chorus.stimulus.program import random_program  # noqa: E402
from chorus.tasks import load_bundled, load_tasks  # noqa: E402


def fresh(tb: str) -> str:
    return tb + f"\n// bench {uuid.uuid4().hex}\n"


def timed_sequential(tasks, cfg, want: int | None = None) -> tuple[list[float], list]:
    """Latency per new testbench; stops after `want` successful builds. Failures are skipped."""
    times, used = [], []
    for t in tasks:
        if want is not None and len(times) >= want:
            break
        t0 = time.monotonic()
        r = simulate(t, fresh(t.reference_tb), cfg)
        if r.status != "ok":
            print(f"  skipped {t.id}: {r.status}: {r.reason}", file=sys.stderr)
            continue
        times.append(time.monotonic() - t0)
        used.append(t)
    return times, used


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=0, help="bundled tasks to use (0 = all)")
    ap.add_argument("--naive-tasks", type=int, default=4, help="tasks built the naive way (slow)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--per-task", type=int, default=4, help="random programs per generated task (part 2)")
    ap.add_argument("--generated-per-family", type=int, default=2)
    args = ap.parse_args()
    tasks = [t for t in load_bundled() if t.reference_tb]
    tasks = tasks[: args.tasks] if args.tasks else tasks
    cache_dir = tempfile.mkdtemp(prefix="chorus-bench-")
    fast = SimConfig(cache=False, cache_dir=cache_dir)
    tc = find_toolchain()
    print(f"verilator: {tc.version}; ccache: {tc.ccache or 'absent'}; tasks: {len(tasks)}")

    t0 = time.monotonic()
    ensure_runtime(tc, verilator_flags(fast), make_vars(fast, tc), Path(cache_dir))
    print(f"one-time runtime objects + precompiled header: {time.monotonic() - t0:.1f} s")

    fast_times, _ = timed_sequential(tasks, fast)
    naive = dataclasses.replace(fast, naive_build=True, prebuilt_runtime=False, pch=False, ccache=False)
    # Plain --coverage includes FSM coverage, which crashes Verilator on some designs: those
    # are skipped (and named) so the baseline is never a fast failure.
    naive_times, naive_tasks = timed_sequential(tasks, naive, want=args.naive_tasks)
    k = len(naive_tasks)
    fast_same, _ = timed_sequential(naive_tasks, fast)
    med_fast = statistics.median(fast_times)
    p90_fast = sorted(fast_times)[int(0.9 * (len(fast_times) - 1))]
    med_fast_k = statistics.median(fast_same)
    med_naive = statistics.median(naive_times)
    print(f"new testbench, fast path:  median {med_fast:.2f} s, p90 {p90_fast:.2f} s over {len(fast_times)} tasks")
    print(f"new testbench, naive:      median {med_naive:.2f} s over {k} tasks "
          f"(fast path on the same {k}: {med_fast_k:.2f} s)")

    cold_jobs = [(t, fresh(t.reference_tb)) for t in tasks]
    cached = dataclasses.replace(fast, cache=True)
    t0 = time.monotonic()
    evaluate_many(cold_jobs, cached, workers=args.workers)
    cold = len(cold_jobs) / (time.monotonic() - t0)
    t0 = time.monotonic()
    results = evaluate_many(cold_jobs, cached, workers=args.workers)
    warm = len(cold_jobs) / (time.monotonic() - t0)
    assert all(r.cached for r in results), "warm pass missed the cache"
    print(f"pool of {args.workers}: cold {cold:.2f} evals/s, warm (cache hits) {warm:.1f} evals/s")
    print(f"speedup_vs_naive={med_naive / med_fast_k:.2f}")
    isolation_part(tasks, fast)
    formats_part(fast, args)


def isolation_part(tasks, cfg: SimConfig) -> None:
    """New-testbench time with and without OS isolation, interleaved per task (two rounds)."""
    times = {"required": [], "off": []}
    for rnd in range(2):
        for t in tasks:
            order = ("required", "off") if rnd % 2 == 0 else ("off", "required")
            for mode in order:
                t0 = time.monotonic()
                r = simulate(t, fresh(t.reference_tb), dataclasses.replace(cfg, isolation=mode))
                if r.status == "ok":
                    times[mode].append(time.monotonic() - t0)
    on, off = statistics.median(times["required"]), statistics.median(times["off"])
    print(f"new testbench with isolation: median {on:.3f} s; without: {off:.3f} s "
          f"({len(times['required'])} + {len(times['off'])} runs)")
    print(f"isolation_overhead={on / off:.3f}")


def formats_part(cfg: SimConfig, args) -> None:
    tasks = load_tasks("generated", per_family=args.generated_per_family)
    print(f"formats on {len(tasks)} generated tasks, {args.per_task} random programs each, pool of {args.workers}")
    rates = {}
    for fmt in [f for f in ("testbench", "body", "vectors", "cocotb") if f in FORMATS]:
        fn = functools.partial(score, fmt, options={})
        jobs = [(t, render(fmt, t, random_program(alias_map(t), 300, seed))) for t in tasks
                for seed in range(args.per_task)]
        if fmt in ("vectors", "cocotb"):
            t0 = time.monotonic()
            evaluate_many([(t, render(fmt, t, random_program(alias_map(t), 10, 99))) for t in tasks], cfg,
                          workers=args.workers, fn=fn)
            print(f"  {fmt}: one-time harness builds for {len(tasks)} designs: {time.monotonic() - t0:.1f} s")
        t0 = time.monotonic()
        results = evaluate_many(jobs, cfg, workers=args.workers, fn=fn)
        rates[fmt] = len(jobs) / (time.monotonic() - t0)
        bad = sum(r.status != "ok" for r in results)
        print(f"  {fmt}: {rates[fmt]:.2f} evals/s over {len(jobs)} evaluations ({bad} not ok)")
    print(f"vectors_speedup={rates['vectors'] / rates['testbench']:.1f}")


if __name__ == "__main__":
    main()
