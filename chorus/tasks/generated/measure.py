"""Measure the generated families: coverage of the strong / medium / weak reference programs and
of uniform random stimulus, per family and difficulty, with pass rates against the targets, and, for
designs with stimulus strategies (--difficulties mixed), which strategies reach each target.

    python -m chorus.tasks.generated.measure --per-family 4 --workers 2
    python -m chorus.tasks.generated.measure --per-family 24 --difficulties mixed --families counter fsm

Targets are the calibrated ones (targets.py), so a column's pass share says how often it reaches them.

Everything runs through the `vectors` format (one harness build per design, then ~40 ms per
evaluation).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from ...core.modes import Quality
from ...core.task import Task
from . import DIFFICULTIES, FAMILIES, MIXED, calibrate_targets, generate_task

GRADES = tuple(q.name for q in Quality)  # every reference grade (policy.quality's choices)
RANDOM_CYCLES = (500, 2000)
COLUMNS = GRADES + tuple(f"random{c}" for c in RANDOM_CYCLES)


def measure_task(task: Task, cache_dir: str | None = None) -> dict:
    """Overall coverage of every column for one task (one process, one harness build)."""
    from ...sim import SimConfig
    from ...stimulus.aliases import alias_map
    from ...stimulus.formats import score
    from ...stimulus.program import random_program, render_vectors

    cfg = SimConfig(cache=False, cache_dir=cache_dir, run_timeout_s=60)
    texts = {g: task.meta["programs"][g] for g in GRADES if g in task.meta["programs"]}
    amap = alias_map(task)
    for c in RANDOM_CYCLES:
        texts[f"random{c}"] = render_vectors(random_program(amap, cycles=c, seed=0))
    row = {"id": task.id, "family": task.family, "difficulty": task.difficulty, "target": task.target,
           "random_mean": (task.meta.get("calibration") or {}).get("random_mean"),
           "strategies": list(task.meta.get("strategies", {})), "reaches": task.meta.get("reaches")}
    for name in COLUMNS:
        if name not in texts:
            row[name] = None
            continue
        text = texts[name]
        r = score("vectors", task, text, cfg)
        row[name] = r.overall if r.status == "ok" else None
        if r.status != "ok":
            row.setdefault("errors", {})[name] = f"{r.status}: {r.reason}"
    return row


def _job(args: tuple) -> dict:
    family, k, seed, difficulty, cache_dir = args
    task = generate_task(family, k, seed, difficulty, with_reference_tb=False)
    return measure_task(calibrate_targets([task], workers=1, cache_dir=cache_dir)[0], cache_dir)


def summarize(rows: list[dict]) -> list[dict]:
    out = []
    for fam in FAMILIES:
        for diff in DIFFICULTIES:
            group = [r for r in rows if r["family"] == fam and r["difficulty"] == diff]
            if not group:
                continue
            s = {"family": fam, "difficulty": diff, "n": len(group),
                 "target": statistics.mean(r["target"] for r in group)}
            for col in COLUMNS:
                vals = [r[col] for r in group if r[col] is not None]
                s[col] = statistics.mean(vals) if vals else None
                passed = [r for r in group if r[col] is not None and r[col] >= r["target"] - 1e-9]
                s[f"{col}_pass"] = len(passed) / len(group)
            out.append(s)
    return out


def reach_table(rows: list[dict]) -> str:
    """Per family and difficulty, how many designs each set of strategies reaches ("none": no strategy
    reaches the target); "" when no design has strategies."""
    rows = [r for r in rows if r.get("strategies")]
    if not rows:
        return ""
    lines = ["| family | difficulty | n | reached by |", "|---|---|---|---|"]
    for fam in FAMILIES:
        for diff in DIFFICULTIES:
            group = [r for r in rows if r["family"] == fam and r["difficulty"] == diff]
            if group:
                counts: dict[str, int] = {}
                for r in group:
                    key = " + ".join(r["reaches"]) or "none"
                    counts[key] = counts.get(key, 0) + 1
                lines.append(f"| {fam} | {diff} | {len(group)} | "
                             + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) + " |")
    return "\n".join(lines)


def table(summary: list[dict]) -> str:
    head = "| family | difficulty | n | mean target | " + " | ".join(COLUMNS) + " |"
    lines = [head, "|" + "---|" * (4 + len(COLUMNS))]
    for s in summary:
        cells = [f"{s[c]:.1f} ({s[c + '_pass']:.0%})" if s[c] is not None else "-" for c in COLUMNS]
        lines.append(f"| {s['family']} | {s['difficulty']} | {s['n']} | {s['target']:.0f} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-family", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--families", nargs="*", default=list(FAMILIES))
    ap.add_argument("--difficulties", nargs="*", default=list(DIFFICULTIES),
                    help=f"any of {[*DIFFICULTIES, MIXED]} ({MIXED}: the staged world's mixture, with strategies)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cache-dir", default=None, help="where harness builds go (default: chorus's cache)")
    ap.add_argument("--json", default=None, help="also write the per-task rows and the summary here")
    a = ap.parse_args(argv)
    jobs = [(f, k, a.seed, d, a.cache_dir) for d in a.difficulties for f in a.families for k in range(a.per_family)]
    t0 = time.monotonic()
    if a.workers > 1:
        with ProcessPoolExecutor(a.workers, mp_context=mp.get_context("forkserver")) as pool:
            rows = list(pool.map(_job, jobs))
    else:
        rows = [_job(j) for j in jobs]
    summary = summarize(rows)
    print(table(summary))
    print(f"\n{len(rows)} tasks in {time.monotonic() - t0:.0f} s; cell = mean overall % (share passing the target)")
    if reach := reach_table(rows):
        print("\nWhich stimulus strategies reach each design's target (simulated):\n\n" + reach)
    for r in rows:
        if r.get("errors"):
            print(f"{r['id']}: {r['errors']}", file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "summary": summary}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
