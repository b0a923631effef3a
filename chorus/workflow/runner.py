"""Run a DAG of steps as subprocesses, at most `jobs` at a time, with a live progress view.

Each step logs to <logs>/<name>.log. A step whose results exist is skipped. When a step fails the
runner starts nothing new, lets running steps finish (their results stay valid for a re-run) and
reports the failure in one line."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from .steps import Step, check_dag

PROGRESS_LINE = re.compile(r"(sft step \d+/\d+ loss [\d.]+|step \d+/\d+ reward [-\d.]+|Merging|merge)")


class StepFailed(RuntimeError):
    pass


def _last_progress(log: Path) -> str:
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, 2) - 4096))
            tail = f.read().decode(errors="replace")
    except OSError:
        return ""
    hits = PROGRESS_LINE.findall(tail)
    return hits[-1] if hits else ""


ERROR_LINES = (re.compile(r"^chorus\.\w+: error: "),  # a job's own one-line error
               re.compile(r"^[\w.]*(Error|Exception)\b.*:"),  # the last line of a traceback
               re.compile(r"Could not (find|override|load)"))  # Hydra composition


def _error_line(log: Path) -> str:
    """The line of a failed step's log that says what went wrong."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()] if log.exists() else []
    lines = [ln for ln in lines if "HYDRA_FULL_ERROR" not in ln]
    for pattern in ERROR_LINES:
        hits = [ln for ln in lines if pattern.search(ln)]
        if hits:
            return hits[-1][:300]
    return (lines or ["(no output)"])[-1][:300]


def run_steps(steps: list[Step], work_dir: Path, jobs: int = 2, env: dict | None = None,
              poll_s: float = 0.5) -> list[dict]:
    """Run (or skip) every step; returns one record per step: name, status, seconds, run_dir, log."""
    check_dag(steps)
    logs, hydra = work_dir / "logs", work_dir / "hydra"
    logs.mkdir(parents=True, exist_ok=True)
    records = {s.name: {"name": s.name, "command": s.command(), "run_dir": str(s.run_dir),
                        "log": str(logs / f"{s.name.replace('/', '__')}.log"), "status": "pending",
                        "seconds": 0.0} for s in steps}
    for s in steps:
        if s.done():
            records[s.name]["status"] = "skipped (done)"
    running: dict[str, tuple[subprocess.Popen, float]] = {}
    failed: list[str] = []
    env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
    console = Console()
    live = console.is_terminal  # a log file or CI gets one plain line per status change instead

    def note(name: str) -> None:
        if not live:
            rec = records[name]
            took = f" in {rec['seconds'] / 60:.1f} min" if rec["seconds"] else ""
            console.print(f"{time.strftime('%H:%M:%S')} {name}: {rec['status']}{took}", highlight=False)

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                  disable=not live) as progress:
        bars = {s.name: progress.add_task(f"{s.name}: {records[s.name]['status']}", total=1) for s in steps}
        for s in steps:
            if records[s.name]["status"] != "pending":
                note(s.name)
        try:
            while True:
                for name, (proc, start) in list(running.items()):
                    rec = records[name]
                    if proc.poll() is None:
                        progress.update(bars[name], description=f"{name}: {_last_progress(Path(rec['log']))}")
                        continue
                    del running[name]
                    rec["seconds"] = round(time.time() - start, 1)
                    rec["status"] = "done" if proc.returncode == 0 else f"failed (exit {proc.returncode})"
                    if proc.returncode != 0:
                        failed.append(name)
                    progress.update(bars[name], description=f"{name}: {rec['status']}", completed=1)
                    note(name)
                ready = [s for s in steps if records[s.name]["status"] == "pending" and not failed
                         and all(records[a]["status"] in ("done", "skipped (done)") for a in s.after)]
                for s in ready[:max(0, jobs - len(running))]:
                    rec = records[s.name]
                    rec["status"] = "running"
                    with open(rec["log"], "w") as log:
                        proc = subprocess.Popen(s.argv(hydra / s.name), stdout=log, stderr=subprocess.STDOUT,
                                                env=env, start_new_session=True)
                    running[s.name] = (proc, time.time())
                    progress.update(bars[s.name], description=f"{s.name}: started")
                    note(s.name)
                if not running and (failed or not ready):
                    break
                time.sleep(poll_s)
        except KeyboardInterrupt:
            for proc, _ in running.values():
                os.killpg(proc.pid, signal.SIGTERM)
            raise
        for s in steps:
            if records[s.name]["status"] != "pending":
                progress.update(bars[s.name], completed=1)
    if failed:
        rec = records[failed[0]]
        raise StepFailed(f"step {failed[0]} {rec['status']}: {_error_line(Path(rec['log']))} (log: {rec['log']}); "
                         "fix it and re-run the same command: finished steps are kept")
    blocked = [n for n, r in records.items() if r["status"] == "pending"]
    if blocked:
        raise StepFailed(f"steps {blocked} never became ready; check their `after` lists")
    return list(records.values())
