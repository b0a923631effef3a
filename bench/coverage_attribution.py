"""Coverage attribution against an independent count, and which figures moved.

    python bench/coverage_attribution.py [--cvdp ../shared/cvdp]

Every bundled reference testbench and, where ../shared/cvdp is present, every CVDP proxy testbench
(proxy_tbs/) is simulated once; its coverage points are then scored three ways:
- chorus: what simulate() reports (points from the task's own files under the DUT instance, the
  instance found by the top module's source span: attribution by source, since 2026-12-03);
- independent: every point whose hierarchy lies under the scored instance path, with no file or
  module logic at all (the count IMC makes of an instance's subtree);
- by name (before 2026-12-01): only points whose module name is a design module's own, which drops
  Verilator's parameter-specialised copies (`lane__K5`).
It prints one row per testbench and then the rows where chorus and by-name differ, with why;
chorus must equal the independent count on every row (no testbench code lies under the DUT).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import chorus.sim.execute as execute  # noqa: E402
from chorus.sim import SimConfig, simulate  # noqa: E402
from chorus.sim.coverage import compute_metrics  # noqa: E402
from chorus.sim.simulate import task_facts  # noqa: E402
from chorus.tasks import load_tasks  # noqa: E402

_points: list = []


def _capture(task, points, facts):
    _points[:] = points
    return _score_points(task, points, facts)


_score_points = execute.score_points
execute.score_points = _capture  # simulate() runs in this process (no pool): keep the raw points


def _items(report) -> int:
    return sum(total for _, total in report.counts.values())


def three_ways(task) -> tuple[str, float | None, float | None, float | None, str, str]:
    """status, chorus, independent and by-name overall, the items each counted, the module copies."""
    r = simulate(task, task.reference_tb, SimConfig(cache=False))
    if r.status != "ok" or r.report is None or r.report.instance is None:
        return r.status, None, None, None, "", r.reason[:80]
    facts, root = task_facts(task), r.report.instance
    independent = compute_metrics([p for p in _points if p.hier == root or p.hier.startswith(root + ".")], root,
                                  True, facts.unpacked)
    by_name = compute_metrics([p for p in _points if p.module in facts.module_names], root, True, facts.unpacked)
    copies = sorted({p.module for p in _points if p.hier.startswith(root) and p.module not in facts.module_names})
    items = f"{_items(r.report)}/{_items(independent)}/{_items(by_name)}"
    return "ok", r.overall, independent.overall, by_name.overall, items, ", ".join(copies)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cvdp", default=str(Path(__file__).resolve().parent.parent.parent / "shared" / "cvdp"))
    args = ap.parse_args()
    suites = [("bundled", [t for t in load_tasks("bundled") if t.reference_tb])]
    proxies = Path(args.cvdp) / "proxy_tbs"
    if proxies.is_dir():
        cvdp = load_tasks("cvdp", path=str(Path(args.cvdp) / "cvdp_v1.0.2_cid012.jsonl"), reference_dir=str(proxies))
        suites.append(("cvdp proxy", [t for t in cvdp if t.reference_tb]))
    fmt = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
    moved, mismatched = [], 0
    print(f"{'suite':<11} {'task':<58} {'status':<8} {'chorus':>7} {'indep.':>7} {'by name':>8}  items c/i/n")
    for suite, tasks in suites:
        for t in tasks:
            status, ours, indep, by_name, items, copies = three_ways(t)
            print(f"{suite:<11} {t.id:<58} {status:<8} {fmt(ours):>7} {fmt(indep):>7} {fmt(by_name):>8}  {items}")
            mismatched += ours != indep
            if ours != by_name or copies:
                moved.append((suite, t.id, by_name, ours, copies))
    print(f"\nchorus == independent count on {sum(len(t) for _, t in suites) - mismatched} of "
          f"{sum(len(t) for _, t in suites)} testbenches")
    print(f"testbenches whose count changed from the by-name count ({len(moved)}; the overall may stay):")
    for suite, tid, old, new, copies in moved:
        shown = copies if len(copies) < 160 else copies[:160] + "..."
        print(f"  {suite} {tid}: {fmt(old)} -> {fmt(new)}; points of module copies now counted: {shown or 'none'}")


if __name__ == "__main__":
    main()
