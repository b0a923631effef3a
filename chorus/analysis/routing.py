"""OPD's routing record (decisions.jsonl): how often each teacher was chosen and why tasks were skipped."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd

DECISIONS = "decisions.jsonl"


def routing_stats(run_dir: str | Path) -> dict | None:
    """Per-decision shares: routed to each teacher, skipped, and the skip reasons; None without a record."""
    path = Path(run_dir) / DECISIONS
    if not path.exists() or not path.read_text().strip():
        return None
    d = pd.read_json(path, lines=True)
    n = len(d)
    routed = d["teacher"].dropna()
    return {"decisions": n, "steps": int(d["step"].nunique()), "routed": len(routed) / n,
            "skipped": 1 - len(routed) / n,
            "by_teacher": {t: c / n for t, c in sorted(Counter(routed).items())},
            "skip_reasons": {r: c / n for r, c in sorted(Counter(d.loc[d["teacher"].isna(), "reason"]).items())}}


def routing_table(runs: pd.DataFrame) -> pd.DataFrame:
    """routing_stats for every run that has a decisions record, one row each."""
    rows = []
    for label, path in zip(runs["run"], runs["path"]):
        stats = routing_stats(path)
        if stats:
            rows.append({"run": label, "decisions": stats["decisions"], "steps": stats["steps"],
                         "routed": stats["routed"], "skipped": stats["skipped"],
                         **{f"to {t}": v for t, v in stats["by_teacher"].items()},
                         **{f"skip: {r}": v for r, v in stats["skip_reasons"].items()}})
    return pd.DataFrame(rows)
