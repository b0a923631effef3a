"""Run a command in its own process group under resource limits, with a trimmed log."""
from __future__ import annotations

import os
import resource
import signal
import subprocess
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
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, preexec_fn=limits)
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
    return RunOutcome(proc.returncode if not timed_out else None, timed_out,
                      time.monotonic() - start, trim_log(log_path))


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
