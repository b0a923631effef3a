"""What runs inside a local pool worker around each scoring job: a per-sample budget, a mark of the
job in flight, and death with the run.

- Budget: each job may grow the worker's address space by `mem_mb` (RLIMIT_AS over what it has
  now) and use `cpu_s` CPU seconds (RLIMIT_CPU over what it has used). Over memory, Python raises
  MemoryError: the sample's compile_error. Over CPU, the kernel kills the worker (SIGXCPU), and so
  may a parser that aborts on a failed allocation: the executor then learns from the mark which
  job was in flight and charges that sample (executor.LocalExecutor). Jailed children set their own
  limits (process.run_limited), so the budget bounds only the unjailed scoring side.
- Mark: a file named after the job's token, present exactly while the job runs.
- Death with the run: a worker gets PR_SET_PDEATHSIG from its parent, the forkserver, which ends
  when the run that started it is gone (multiprocessing's forkserver exits at EOF on its `alive`
  pipe). So a `kill -9` of the run takes its workers down at once, and with them their jailed
  builds (the jail and unjailed commands have PR_SET_PDEATHSIG too, process.run_limited).
"""
from __future__ import annotations

import ctypes
import os
import resource
import signal
from dataclasses import dataclass, field
from pathlib import Path

PR_SET_PDEATHSIG = 1
try:  # resolved once here: a child between fork and exec must not load libraries (preexec_fn)
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _PRCTL = None


@dataclass(frozen=True)
class Budget:
    """What scoring one sample may cost the (unjailed) worker; the defaults are SimConfig's
    (simulator.scoring_mem_mb, scoring_cpu_s)."""
    mem_mb: int = field(default_factory=lambda: _sim_default("scoring_mem_mb"))
    cpu_s: float = field(default_factory=lambda: _sim_default("scoring_cpu_s"))


def _sim_default(name: str):
    from .config import SimConfig

    return SimConfig.__dataclass_fields__[name].default


def init_worker() -> None:
    """A pool worker's initializer: die with the forkserver, and dump no core when the CPU budget's
    SIGXCPU (or a crash) ends it."""
    die_with_parent()
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """PR_SET_PDEATHSIG (Linux; a no-op elsewhere): this process gets `sig` (by default dies) when
    its parent does."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def _vm_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def run_job(fn, marks: str, token: str, budget: Budget, *args):
    """Run one job under the budget, marked in flight. A MemoryError is the sample's compile_error
    (only scoring functions, which return a SimResult, run here)."""
    from .result import SimResult

    mark = Path(marks) / token
    mark.write_text(str(os.getpid()))
    saved = {lim: resource.getrlimit(lim) for lim in (resource.RLIMIT_AS, resource.RLIMIT_CPU)}
    try:
        _limit(resource.RLIMIT_AS, _vm_bytes() + (budget.mem_mb << 20))
        used = resource.getrusage(resource.RUSAGE_SELF)
        _limit(resource.RLIMIT_CPU, int(used.ru_utime + used.ru_stime + budget.cpu_s) + 1)
        try:
            return fn(*args)
        except MemoryError:
            return SimResult("compile_error", f"scoring this sample needed more than simulator.scoring_mem_mb="
                             f"{budget.mem_mb} MB; nothing was simulated")
    finally:
        for lim, (soft, hard) in saved.items():
            resource.setrlimit(lim, (soft, hard))
        mark.unlink(missing_ok=True)


def _limit(which: int, soft: int) -> None:
    _, hard = resource.getrlimit(which)
    resource.setrlimit(which, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
