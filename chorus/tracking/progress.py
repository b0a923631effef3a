"""Structured progress of a job's long phases: <run dir>/progress.jsonl, one record per update.

Each record is {"phase", "done", "total", "t"} (t = seconds since the epoch). The job logs a line
with an ETA as it goes; the pipeline reads the newest record of each running step instead of
scraping logs. The ETA assumes the rest of the phase runs at the pace it has kept so far.
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path

PROGRESS = "progress.jsonl"
log = logging.getLogger("chorus.progress")


def eta_seconds(done: int, total: int, elapsed: float) -> float | None:
    """Time left at the pace so far; None before the first unit finished."""
    if done <= 0 or total <= 0:
        return None
    return max(0.0, elapsed / done * (total - done))


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def throttled(report, phase: str, seconds: float = 10.0):
    """on_step(done, total) calling report(phase, done, total) at the first step, then at most every
    `seconds`, and at the last: a long loop's progress without a line per step."""
    last = [float("-inf")]

    def on_step(done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - last[0] >= seconds:
            last[0] = now
            report(phase, done, total)
    return on_step


class Progress:
    """Report the phases of one job into its run dir (or only to the log when `out` is None)."""

    def __init__(self, out: str | Path | None):
        self.path = Path(out) / PROGRESS if out else None
        self.started: dict[str, tuple[float, int]] = {}  # phase -> (when its clock started, units done then)

    def start(self, phase: str, total: int) -> None:
        self.started[phase] = (time.time(), 0)
        self.update(phase, 0, total)

    def update(self, phase: str, done: int, total: int) -> None:
        """Record `done` of `total`. A phase nobody start()ed is timed from its first record, and its
        pace counts only the units finished since (a step reported after minutes of data building
        says nothing about the pace of the next steps)."""
        now = time.time()
        t0, d0 = self.started.setdefault(phase, (now, done))
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as f:
                f.write(json.dumps({"phase": phase, "done": done, "total": total, "t": now, "t0": t0, "d0": d0})
                        + "\n")
        if done:
            eta = eta_seconds(done - d0, total - d0, now - t0)
            log.info("%s %d/%d, ETA %s", phase, done, total, format_duration(eta))

    def callback(self, phase: str):
        """A `(done, total)` callable for a loop that starts now and reports its own counts. The
        phase's clock starts here, so the first report's ETA counts the time its first unit took
        (and a phase repeated under the same name, e.g. per OPD step, is timed afresh)."""
        self.started[phase] = (time.time(), 0)
        return lambda done, total: self.update(phase, done, total)


def latest(out: str | Path) -> dict | None:
    """The newest progress record of a run dir, or None."""
    path = Path(out) / PROGRESS
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, 2) - 4096))
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def describe(record: dict | None, now: float | None = None) -> str:
    """`rl step 3/4, ETA 1m05s` for a progress record."""
    if not record:
        return ""
    now = time.time() if now is None else now
    d0 = record.get("d0", 0)
    at_record = eta_seconds(record["done"] - d0, record["total"] - d0, record["t"] - record["t0"])
    eta = None if at_record is None else max(0.0, at_record - (now - record["t"]))  # counting down since
    left = f", ETA {format_duration(eta)}" if record["done"] and record["done"] < record["total"] else ""
    return f"{record['phase']} {record['done']}/{record['total']}{left}"
