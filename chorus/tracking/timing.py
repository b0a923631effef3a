"""Where a job's time went: seconds per kind (generation_s, simulation_wait_s, training_s), kept in a
plain dict (JobContext.timing) and written to summary.json as "timing"."""
from __future__ import annotations


def add_seconds(timing: dict | None, kind: str, seconds: float) -> None:
    if timing is not None:
        timing[kind] = timing.get(kind, 0.0) + seconds


def rounded(timing: dict) -> dict:
    return {k: round(v, 2) for k, v in sorted(timing.items())}
