"""Score the bundled suite's reference testbenches and show what they miss.

    python -m chorus.tasks.check [family-or-id ...] [--uncovered N]
"""
from __future__ import annotations

import argparse
import sys

from ..sim import SimConfig, simulate
from .bundled import load_bundled


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ids", nargs="*", help="families or task ids (default: all)")
    ap.add_argument("--uncovered", type=int, default=8, help="uncovered points to list per task")
    args = ap.parse_args(argv)
    tasks = [t for t in load_bundled() if not args.ids or t.id in args.ids or t.family in args.ids]
    bad = 0
    for t in tasks:
        r = simulate(t, t.reference_tb, SimConfig())
        ok = r.passed(t.target, strict_instance=True)
        bad += not ok
        overall = f"{r.overall:.2f}" if r.overall is not None else "-"
        metrics = {k: round(v, 1) for k, v in (r.report.metrics if r.report else {}).items()}
        print(f"{'PASS' if ok else 'FAIL'} {t.family}/{t.id} status={r.status} overall={overall} "
              f"target={t.target} metrics={metrics} {r.reason}")
        if not ok and r.status != "ok":
            print("   ", (r.build_log or r.run_log)[-1500:])
        for u in (r.report.uncovered if r.report else [])[: args.uncovered]:
            print(f"    uncovered {u.metric} {u.file}:{u.line} {u.what} | {u.source}")
    print(f"{len(tasks) - bad}/{len(tasks)} reference testbenches reach their target")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
