"""Run a DAG of steps, at most `jobs` at a time, with a live progress view; a launcher
(workflow/launchers.py) starts each: a local subprocess, or a submitit job.

Each step logs to <logs>/<name>.log; progress comes from the step's progress.jsonl and a handled
error from the error.txt its job leaves in its Hydra dir (the log is only read for crashes). A step
whose results were made with its planned settings is skipped, keeping the time it took when it ran;
a step whose dir holds results made with other settings stops the run before anything starts.
A step is done only when it exits 0 with its results (Step.done); one stopped by a signal is
"preempted" and resumes from its checkpoint on a re-run. When a step fails the runner starts nothing new, lets running steps finish (their results stay
valid for a re-run) and reports the failure in one line. <work_dir>/steps.json is rewritten at
every change of status."""
from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from ..tracking.progress import describe, latest
from ..tracking.record import ERROR_FILE
from .launchers import Ended, Launcher, LocalLauncher, StepHandle
from .steps import Step, check_dag



class StepFailed(RuntimeError):
    pass


ERROR_LINES = (re.compile(r"^chorus\.\w+: error: "),  # a job's own one-line error
               re.compile(r"^[\w.]*(Error|Exception)\b.*:"),  # the last line of a traceback
               re.compile(r"Could not (find|override|load)"))  # Hydra composition


def _error_line(log: Path, hydra_dir: Path) -> str:
    """What went wrong in a failed step: its job's own error, else the telling line of its log."""
    if (hydra_dir / ERROR_FILE).exists():
        return (hydra_dir / ERROR_FILE).read_text().strip()[:300]
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()] if log.exists() else []
    lines = [ln for ln in lines if "HYDRA_FULL_ERROR" not in ln]
    for pattern in ERROR_LINES:
        hits = [ln for ln in lines if pattern.search(ln)]
        if hits:
            return hits[-1][:300]
    return (lines or ["(no output)"])[-1][:300]


def _previous(path: Path) -> dict:
    try:
        return {r["name"]: r for r in json.loads(path.read_text())}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _check_stale(steps: list[Step]) -> None:
    for s in steps:
        state, diff = s.state()
        if state == "stale":
            raise StepFailed(f"step {s.name}: {s.run_dir} holds results made with other settings "
                             f"({'; '.join(diff[:3])}{'; ...' if len(diff) > 3 else ''}); move that dir away "
                             "or use another runs_dir")


def _status(end: Ended, step: Step) -> str:
    """A step is done when it exited 0 and left its results; a signal's exit (128 + n: a job
    stopped at a step's end with its checkpoint, or -n: killed) is a pre-emption, resumed by a re-run."""
    if end.code is None:
        return "failed (no exit status)"
    if end.code == 0:
        return "done" if step.done() else "failed (exit 0 without its results)"
    signum = end.code - 128 if end.code > 128 else -end.code
    if signum in (signal.SIGTERM, signal.SIGINT, signal.SIGKILL):
        return f"preempted ({signal.Signals(signum).name})"
    return f"failed (exit {end.code})"


def _attempt_seconds(old: dict) -> float:
    """What an unfinished step's earlier attempts took: a recorded end (preempted, failed), else the
    last write to its log (the pipeline itself was killed while the step ran), plus the attempts before."""
    if old.get("status") != "running":
        return old.get("seconds") or 0.0
    try:
        last = max(0.0, Path(old["log"]).stat().st_mtime - old["started"])
    except (OSError, KeyError):
        last = 0.0
    return old.get("earlier_seconds", 0.0) + last


def run_steps(steps: list[Step], work_dir: Path, jobs: int = 2, env: dict | None = None,
              poll_s: float = 0.5, report_every_s: float = 60.0, launcher: Launcher | None = None) -> list[dict]:
    """Run (or skip) every step; returns one record per step: name, status, seconds, run_dir, log, and
    for a step that ran (now or in the run a skipped one was kept from) its start and end (Unix time).
    A step that took several attempts (a stop, a preemption, a failure: steps.json from the run
    before) has `attempts`, and its seconds count them all (earlier_seconds: those before this one).
    `env`: variables added to the environment the steps run in; `launcher`: local subprocesses
    unless given (launchers.make_launcher)."""
    launcher = launcher or LocalLauncher()
    check_dag(steps)
    _check_stale(steps)
    logs, hydra, record_path = work_dir / "logs", work_dir / "hydra", work_dir / "steps.json"
    by_name = {s.name: s for s in steps}
    logs.mkdir(parents=True, exist_ok=True)
    before = _previous(record_path)
    records = {s.name: {"name": s.name, "command": s.command(), "run_dir": str(s.run_dir),
                        "log": str(logs / f"{s.name.replace('/', '__')}.log"), "status": "pending",
                        "seconds": 0.0} for s in steps}
    for s in steps:
        old = before.get(s.name, {})
        same = old.get("run_dir") == str(s.run_dir)
        if s.done():  # the time it took when it ran, and when that was
            records[s.name].update(status="skipped (done)", seconds=old.get("seconds", 0.0) if same else 0.0,
                                   **{k: old[k] for k in ("started", "ended", "attempts") if same and k in old})
        elif same and old.get("started"):  # seconds spent in attempts that did not finish it
            records[s.name].update(attempts=old.get("attempts", 1) + 1, earlier_seconds=round(_attempt_seconds(old), 1))
    running: dict[str, tuple[StepHandle, float]] = {}  # name -> (the launcher's handle, start time)
    failed: list[str] = []
    why: dict[str, str] = {}  # a launcher's account of a step it lost
    env = {**(env or {}), "PYTHONUNBUFFERED": "1"}  # on top of the environment where the step runs
    console = Console()
    live = console.is_terminal  # a log file or CI gets plain lines: status changes, progress once a minute
    reported: dict[str, float] = {}

    def save() -> None:
        record_path.write_text(json.dumps(list(records.values()), indent=2) + "\n")

    def note(name: str) -> None:
        save()
        if not live:
            rec = records[name]
            took = f" in {rec['seconds'] / 60:.1f} min" if rec["seconds"] else ""
            console.print(f"{time.strftime('%H:%M:%S')} {name}: {rec['status']}{took}", highlight=False)

    def show_progress(name: str, bar) -> None:
        text = describe(latest(records[name]["run_dir"]))
        progress.update(bar, description=f"{name}: {text or 'running'}")
        if not live and text and time.time() - reported.get(name, 0.0) >= report_every_s:
            reported[name] = time.time()
            console.print(f"{time.strftime('%H:%M:%S')} {name}: {text}", highlight=False)

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                  disable=not live) as progress:
        bars = {s.name: progress.add_task(f"{s.name}: {records[s.name]['status']}", total=1) for s in steps}
        for s in steps:
            if records[s.name]["status"] != "pending":
                note(s.name)
        save()
        try:
            while True:
                for name, (handle, start) in list(running.items()):
                    rec = records[name]
                    end = handle.ended()
                    if end is None:
                        show_progress(name, bars[name])
                        continue
                    del running[name]
                    now = time.time()
                    rec["seconds"] = round(now - start + rec.get("earlier_seconds", 0.0), 1)
                    rec["ended"] = round(now, 1)
                    rec["status"] = _status(end, by_name[name])
                    if rec["status"] != "done":
                        failed.append(name)
                        why[name] = end.why
                    progress.update(bars[name], description=f"{name}: {rec['status']}", completed=1)
                    note(name)
                ready = [s for s in steps if records[s.name]["status"] == "pending" and not failed
                         and all(records[a]["status"] in ("done", "skipped (done)") for a in s.after)]
                for s in ready[:max(0, jobs - len(running))]:
                    rec = records[s.name]
                    start = time.time()
                    rec["status"], rec["started"] = "running", round(start, 1)
                    (s.hydra_dir(hydra) / ERROR_FILE).unlink(missing_ok=True)
                    running[s.name] = (launcher.start(s.name, s.argv(s.hydra_dir(hydra)), Path(rec["log"]), env),
                                       start)
                    progress.update(bars[s.name], description=f"{s.name}: started")
                    note(s.name)
                if not running and (failed or not ready):
                    break
                time.sleep(poll_s)
        except KeyboardInterrupt:
            for handle, _ in running.values():
                handle.cancel()
            raise
        for s in steps:
            if records[s.name]["status"] != "pending":
                progress.update(bars[s.name], completed=1)
    if failed:
        rec = records[failed[0]]
        line = why[failed[0]] or _error_line(Path(rec["log"]), by_name[failed[0]].hydra_dir(hydra))
        again = ("re-run the same command: it resumes from its last checkpoint" if rec["status"].startswith("preempted")
                 else "fix it and re-run the same command")
        raise StepFailed(f"step {failed[0]} {rec['status']}: {line} (log: {rec['log']}); {again}: finished steps "
                         "are kept")
    blocked = [n for n, r in records.items() if r["status"] == "pending"]
    if blocked:
        raise StepFailed(f"steps {blocked} never became ready; check their `after` lists")
    return list(records.values())
