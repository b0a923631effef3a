"""Simulator throughput, measured side by side in one run on the same machine.

    python bench/sim_throughput.py [--tasks N] [--naive-tasks K] [--workers W] [--per-task S] [--parts P]

"Old path" below is today's code with the speed-ups of issue 26 switched off in-process (`old_path`
and clang=False): Verilator's runtime objects at the models' -O0, chorus's driver compiled in every
build, the default linker, models compiled by g++ (not clang), Verilator's Python includer, the AST
check before (not beside) the build's Verilator run, and (vectors) one simulator process per program.
Each path has its own cache dir.

Part 1, whole testbenches (bundled reference testbenches), on prepared designs (each design's one-time
checks ran first, untimed):
  - new-testbench latency (no result cache), today's path and the old path, interleaved task by task:
    prints `new_testbench_median_s=<s>` and `new_testbench_speedup=<old median / new median>`;
  - the same for a naive build (`--coverage`, default optimisation, no prebuilt runtime objects, no
    precompiled header) on the first K tasks: `speedup_vs_naive=<x>`;
  - evaluations per second with a worker pool: cold (new testbenches) and warm (cache hits).
Part 2, OS isolation: new testbenches with simulator.isolation=required and =off, interleaved:
  `isolation_overhead=<x>`.
Part 3, stimulus formats on generated tasks, S random programs per task, a pool of W workers, result
cache off, each design's harness built first (timed apart):
  - testbench, body and cocotb: evaluations per second;
  - vectors three ways on the same programs: the old path, one process per program, and batched (a
    task's programs in one process). Checks that batched and one-per-process results are identical
    and prints `batched_vectors_evals_per_s=<x>`, the ratios, and last `vectors_evals_per_s=<x>` (the
    batched path, what chorus runs).
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import Future
from contextlib import contextmanager, nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chorus.sim import SimConfig, build, runtime, simulate  # noqa: E402
from chorus.sim.pool import evaluate_many  # noqa: E402
from chorus.sim.toolchain import find_toolchain  # noqa: E402
from chorus.stimulus.aliases import alias_map  # noqa: E402
from chorus.stimulus.formats import FORMATS, render, score, score_many  # noqa: E402
from chorus.stimulus.program import random_program  # noqa: E402
from chorus.tasks import load_bundled, load_tasks  # noqa: E402


class InlineExecutor:
    """A ThreadPoolExecutor stand-in that runs each job at once: the AST check before the build."""

    def __init__(self, *a, **k):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def submit(self, fn, *args, **kwargs):
        f = Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed over as the real executor would
            f.set_exception(exc)
        return f


def python_includer_make_vars(cfg, tc, naive=False):
    v = dict(MAKE_VARS(cfg, tc, naive))
    v.pop("VERILATOR_INCLUDER", None)
    return v


MAKE_VARS = build.make_vars
# the module (chorus.sim's `simulate` is the function of the same name)
sim_simulate = importlib.import_module("chorus.sim.simulate")


@contextmanager
def old_path():
    """The simulator as it was before issue 26's speed-ups (see the module docstring); the old
    SimConfig also has clang=False."""
    patched = ((runtime, "RUNTIME_OPT", None), (build, "fast_linker", lambda tc: ""),
               (build, "main_fits", lambda *a, **k: False), (build, "make_vars", python_includer_make_vars),
               (sim_simulate, "ThreadPoolExecutor", InlineExecutor))
    saved = [(m, name, getattr(m, name)) for m, name, _ in patched]
    for m, name, value in patched:
        setattr(m, name, value)
    try:
        yield
    finally:
        for m, name, value in saved:
            setattr(m, name, value)


def old_score(fmt, task, completion, cfg, options=None):
    """`score` on the old path (module-level: pool workers run it)."""
    with old_path():
        return score(fmt, task, completion, cfg, options)


def old_simulate(task, testbench, cfg):
    with old_path():
        return simulate(task, testbench, cfg)


def fresh(tb: str) -> str:
    return tb + f"\n// bench {uuid.uuid4().hex}\n"


def timed(task, cfg, old: bool) -> float | None:
    with old_path() if old else nullcontext():
        t0 = time.monotonic()
        r = simulate(task, fresh(task.reference_tb), cfg)
    if r.status != "ok":
        print(f"  skipped {task.id}: {r.status}: {r.reason}", file=sys.stderr)
        return None
    return time.monotonic() - t0


def p90(xs: list[float]) -> float:
    return sorted(xs)[int(0.9 * (len(xs) - 1))]


def testbench_part(tasks, new: SimConfig, old: SimConfig, args) -> None:
    t0 = time.monotonic()
    for t in tasks:  # the one-time work: runtime kits, each design's checks (untimed)
        timed(t, new, False)
        timed(t, old, True)
    print(f"prepared {len(tasks)} designs on both paths (runtime kits, per-design checks): "
          f"{time.monotonic() - t0:.1f} s")
    times = {False: [], True: []}
    for i, t in enumerate(tasks):
        for is_old in ((False, True) if i % 2 == 0 else (True, False)):
            if (dt := timed(t, old if is_old else new, is_old)) is not None:
                times[is_old].append(dt)
    med_new, med_old = statistics.median(times[False]), statistics.median(times[True])
    print(f"new testbench, today:    median {med_new:.3f} s, p90 {p90(times[False]):.3f} s ({len(times[False])} tasks)")
    print(f"new testbench, old path: median {med_old:.3f} s, p90 {p90(times[True]):.3f} s ({len(times[True])} tasks)")
    print(f"new_testbench_median_s={med_new:.3f}")
    print(f"new_testbench_speedup={med_old / med_new:.2f}")

    naive = dataclasses.replace(new, naive_build=True, prebuilt_runtime=False, pch=False, ccache=False)
    # Plain --coverage includes FSM coverage, which crashes Verilator on some designs: those are
    # skipped (and named) so the baseline is never a fast failure.
    naive_times, same = [], []
    for t in tasks:
        if len(naive_times) >= args.naive_tasks:
            break
        if (dt := timed(t, naive, False)) is not None:
            naive_times.append(dt)
            same.append(timed(t, new, False) or float("nan"))
    print(f"new testbench, naive:    median {statistics.median(naive_times):.2f} s over {len(naive_times)} tasks "
          f"(today's path on the same: {statistics.median(same):.3f} s)")
    print(f"speedup_vs_naive={statistics.median(naive_times) / statistics.median(same):.2f}")

    cold = {}
    for way, cfg, fn in (("old path", old, old_simulate), ("today", new, simulate)):
        jobs = [(t, fresh(t.reference_tb)) for t in tasks]
        t0 = time.monotonic()
        evaluate_many(jobs, dataclasses.replace(cfg, cache=True), workers=args.workers, fn=fn)
        cold[way] = len(jobs) / (time.monotonic() - t0)
    t0 = time.monotonic()
    results = evaluate_many(jobs, dataclasses.replace(new, cache=True), workers=args.workers)
    warm = len(jobs) / (time.monotonic() - t0)
    assert all(r.cached for r in results), "warm pass missed the cache"
    print(f"pool of {args.workers}, new testbenches: {cold['today']:.2f} evals/s today, {cold['old path']:.2f} on the "
          f"old path; warm (cache hits) {warm:.1f} evals/s")


def isolation_part(tasks, cfg: SimConfig) -> None:
    """New-testbench time with and without OS isolation, interleaved per task (two rounds)."""
    times = {"required": [], "off": []}
    for rnd in range(2):
        for t in tasks:
            for mode in (("required", "off") if rnd % 2 == 0 else ("off", "required")):
                if (dt := timed(t, dataclasses.replace(cfg, isolation=mode), False)) is not None:
                    times[mode].append(dt)
    on, off = statistics.median(times["required"]), statistics.median(times["off"])
    print(f"new testbench with isolation: median {on:.3f} s; without: {off:.3f} s "
          f"({len(times['required'])} + {len(times['off'])} runs)")
    print(f"isolation_overhead={on / off:.3f}")


def outcome(r) -> tuple:
    return r.status, r.reason, r.end, r.report.to_dict() if r.report else None


def formats_part(new: SimConfig, old: SimConfig, args) -> None:
    tasks = load_tasks("generated", per_family=args.generated_per_family)
    print(f"formats on {len(tasks)} generated tasks, {args.per_task} random programs each, pool of {args.workers}")
    rates = {}
    for fmt in [f for f in ("testbench", "body", "cocotb", "vectors") if f in FORMATS]:
        jobs = [(t, render(fmt, t, random_program(alias_map(t), 300, seed))) for t in tasks
                for seed in range(args.per_task)]
        ways = {"old": (old, functools.partial(old_score, fmt), None)} if fmt == "vectors" else {}
        ways["one per process"] = (new, functools.partial(score, fmt), None)
        if fmt == "vectors":
            ways["batched"] = (new, functools.partial(score, fmt), functools.partial(score_many, fmt))
        results = {}
        for way, (cfg, fn, many) in ways.items():
            if fmt in ("vectors", "cocotb"):
                t0 = time.monotonic()
                evaluate_many([(t, render(fmt, t, random_program(alias_map(t), 10, 99))) for t in tasks], cfg,
                              workers=args.workers, fn=fn)
                print(f"  {fmt} ({way}): one-time harness builds for {len(tasks)} designs: {time.monotonic() - t0:.1f} s")
            t0 = time.monotonic()
            results[way] = evaluate_many(jobs, cfg, workers=args.workers, fn=fn, fn_many=many)
            rates[(fmt, way)] = len(jobs) / (time.monotonic() - t0)
            bad = sum(r.status != "ok" for r in results[way])
            print(f"  {fmt} ({way}): {rates[(fmt, way)]:.2f} evals/s over {len(jobs)} evaluations ({bad} not ok)")
        if fmt == "vectors":
            same = [outcome(a) for a in results["batched"]] == [outcome(b) for b in results["one per process"]]
            print(f"  vectors: batched results identical to one process per program: {same}")
            assert same, "batched results differ from solo results"
    batched = rates[("vectors", "batched")]
    print(f"batched_vectors_evals_per_s={batched:.1f}")
    print(f"batched_over_one_per_process={batched / rates[('vectors', 'one per process')]:.2f}")
    print(f"batched_over_old_path={batched / rates[('vectors', 'old')]:.2f}")
    print(f"vectors_speedup={batched / rates[('testbench', 'one per process')]:.1f}")
    print(f"vectors_evals_per_s={batched:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=0, help="bundled tasks to use (0 = all)")
    ap.add_argument("--naive-tasks", type=int, default=4, help="tasks built the naive way (slow)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--per-task", type=int, default=16, help="random programs per generated task (part 3)")
    ap.add_argument("--generated-per-family", type=int, default=2)
    ap.add_argument("--parts", default="testbench,isolation,formats",
                    help="which parts to run, comma-separated (e.g. --parts formats)")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    tasks = [t for t in load_bundled() if t.reference_tb]
    tasks = tasks[: args.tasks] if args.tasks else tasks
    new = SimConfig(cache=False, cache_dir=tempfile.mkdtemp(prefix="chorus-bench-"))
    old = SimConfig(cache=False, cache_dir=tempfile.mkdtemp(prefix="chorus-bench-old-"), clang=False, harness_opt="-O0")
    tc = find_toolchain()
    print(f"verilator: {tc.version}; ccache: {tc.ccache or 'absent'}; linker flag: "
          f"{build.fast_linker(tc) or 'default'}; tasks: {len(tasks)}")
    if "testbench" in parts:
        testbench_part(tasks, new, old, args)
    if "isolation" in parts:
        isolation_part(tasks, new)
    if "formats" in parts:
        formats_part(new, old, args)


if __name__ == "__main__":
    main()
