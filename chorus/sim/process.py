"""Run a command in its own process group under resource limits, with a trimmed log."""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class RunOutcome:
    returncode: int | None
    timed_out: bool
    seconds: float
    log: str


def run_limited(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float, log_path: Path,
                mem_mb: int, file_mb: int, cpu_s: float | None = None) -> RunOutcome:
    """Run `cmd` in its own process group with rlimits; kill the whole group on timeout."""

    def limits() -> None:
        os.setsid()
        mem = mem_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        fsz = file_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsz, fsz))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        cpu = int(cpu_s or timeout_s * 2 + 5)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))

    start = time.monotonic()
    fired = threading.Event()

    def kill_group(pid: int) -> None:
        fired.set()
        _killpg(pid)

    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, preexec_fn=limits)
        # A timer thread kills on timeout, so the wait itself blocks in waitpid: Popen.wait's
        # own timeout polls with sleeps, which cost tens of ms per short simulation.
        timer = threading.Timer(timeout_s, kill_group, args=(proc.pid,))
        timer.daemon = True
        timer.start()
        try:
            proc.wait()
        finally:
            timer.cancel()
            _killpg(proc.pid)  # leftovers of the group (e.g. make's children)
            proc.wait()
    timed_out = fired.is_set()
    return RunOutcome(None if timed_out else proc.returncode, timed_out, time.monotonic() - start,
                      trim_log(log_path))


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def trim_log(path: Path, head: int = 6000, tail: int = 6000) -> str:
    """First and last few KB of a log: enough to diagnose, never gigabytes."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            if size <= head + tail:
                return f.read().decode("utf-8", "replace")
            first = f.read(head)
            f.seek(size - tail)
            last = f.read()
    except OSError:
        return ""
    skipped = size - head - tail
    return (first.decode("utf-8", "replace") + f"\n... [{skipped} bytes trimmed] ...\n"
            + last.decode("utf-8", "replace"))
