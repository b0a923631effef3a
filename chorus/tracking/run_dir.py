"""Write and read a run directory's per-task table (jsonl + parquet) and summary.json."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

TABLE = "per_task.jsonl"
PARQUET = "per_task.parquet"
SUMMARY = "summary.json"


def write_run(out_dir: Path, rows: list[dict], summary: dict) -> None:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / TABLE, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    df = pd.DataFrame(rows)
    if "metrics" in df:  # parquet needs one struct type: fill absent metrics with nulls
        keys = sorted({k for m in df["metrics"] for k in (m or {})})
        df["metrics"] = [{k: (m or {}).get(k) for k in keys} if keys else None for m in df["metrics"]]
    df.to_parquet(out_dir / PARQUET, index=False)
    write_summary(out_dir, summary)


def write_summary(out_dir: Path, summary: dict) -> None:
    """summary.json: the last file every job writes, so a run dir holding one is finished."""
    (Path(out_dir) / SUMMARY).write_text(json.dumps(summary, indent=2, default=str) + "\n")


def read_table(where: Path) -> pd.DataFrame:
    """A run dir's per-task table (parquet, else jsonl), or a per_task file given directly."""
    where = Path(where)
    if where.is_dir():
        where = where / PARQUET if (where / PARQUET).exists() else where / TABLE
    return pd.read_parquet(where) if where.suffix == ".parquet" else pd.read_json(where, lines=True)


def kept_answers(df: pd.DataFrame) -> pd.DataFrame:
    """Multi-round protocols log every round; each sample's kept answer is the one that counts."""
    return df[df["final"].fillna(True).astype(bool)] if "final" in df else df


def read_summary(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / SUMMARY).read_text())
