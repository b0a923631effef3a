"""Where simulations run: one small interface (submit, shutdown) chosen by `simulator.executor`.

Callers create one executor and pass it down (RL, OPD, SFT data, evaluation); results are read
with `pool.settled`, which turns a dead or raising worker into `harness_error` for that sample."""
from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import threading
import uuid
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

from .result import SimResult
from .worker_guard import Budget, init_worker, run_job
from .workdirs import new_workdir

if TYPE_CHECKING:
    from .config import SimConfig


class Executor(Protocol):
    def submit(self, fn: Callable, *args) -> Future: ...

    def shutdown(self) -> None: ...


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


class LocalExecutor:
    """A forkserver process pool (workers must not inherit a parent's torch threads or open model
    files) whose jobs run under a per-sample budget (worker_guard). A worker that dies breaks a
    ProcessPoolExecutor for good and fails every job it held; here a death is charged only to the
    job that caused it:
    - a job that was in flight when the pool died (its mark is still there) is re-run alone in a
      fresh one-worker pool; if that worker dies too, the sample did it, and it is charged
      (runtime_error, with the usual penalty), never harness_error; it is charged again every
      time it is submitted, however many times it kills a worker;
    - a job that was only queued did nothing: it is re-run on a fresh pool, as often as it takes.
      That ends: every break moves the jobs then in flight (the one that broke it among them) out
      of the shared pool, so each round the queue ahead of a job only shrinks.
    So a long RL run outlives any sample that crashes, hogs memory or CPU, and every other sample
    keeps its own result."""

    def __init__(self, workers: int | None = None, budget: Budget | None = None):
        self.workers = workers or default_workers()
        self.budget = budget or Budget()
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._marks: Path | None = None  # chorus-marks-<pid>-...: swept by the next run if this one is killed
        self._solo: ThreadPoolExecutor | None = None

    def _context(self):
        ctx = mp.get_context("forkserver")
        # takes effect when this context's forkserver starts (once per process): it ends with the run.
        # The scoring jobs' module (and torch, which it imports) is loaded there once, so a worker never
        # dlopens a library after its fork: seen hanging for good in dlopen(torch) inside a worker whose
        # pyarrow jemalloc background thread held the allocator (a smoke pipeline in the full suite)
        ctx.set_forkserver_preload(["__main__", "chorus.sim.forkserver_watch", "chorus.protocol.direct",
                                    "chorus.sim.forkserver_warm"])
        return ctx

    def _fresh(self, broken: ProcessPoolExecutor | None = None) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is not None and self._pool is not broken:
                return self._pool  # another job already replaced the broken pool
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
            if self._marks is None:
                self._marks = new_workdir("marks")
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=self._context(),
                                             initializer=init_worker)
            return self._pool

    def submit(self, fn: Callable, *args) -> Future:
        outer: Future = Future()
        outer.set_running_or_notify_cancel()
        self._launch(outer, fn, args, uuid.uuid4().hex)
        return outer

    def _launch(self, outer: Future, fn: Callable, args: tuple, token: str) -> None:
        pool = self._pool or self._fresh()
        while True:  # a fresh pool can be broken again (by a job in flight in it) before this submit
            try:
                inner = pool.submit(run_job, fn, str(self._marks), token, self.budget, *args)
                break
            except BrokenProcessPool:
                pool = self._fresh(pool)
        inner.add_done_callback(lambda f: self._settle(outer, f, pool, fn, args, token))

    def _settle(self, outer: Future, inner: Future, pool, fn, args, token: str) -> None:
        exc = inner.exception()
        if not isinstance(exc, BrokenProcessPool):
            outer.set_exception(exc) if exc is not None else outer.set_result(inner.result())
            return
        mark = self._marks / token
        if mark.exists():  # in flight when its worker died: alone, it shows whether it was the cause
            mark.unlink(missing_ok=True)
            with self._lock:
                self._solo = self._solo or ThreadPoolExecutor(self.workers, thread_name_prefix="chorus-solo")
                self._solo.submit(self._run_alone, outer, fn, args, token)
        else:  # only queued: another job broke the pool, so this one is never charged for it
            self._fresh(pool)
            self._launch(outer, fn, args, token)

    def _run_alone(self, outer: Future, fn, args, token: str) -> None:
        pool = ProcessPoolExecutor(max_workers=1, mp_context=self._context(), initializer=init_worker)
        try:
            outer.set_result(pool.submit(run_job, fn, str(self._marks), token, self.budget, *args).result())
        except BrokenProcessPool:
            outer.set_result(SimResult("runtime_error", "scoring this sample killed its worker process, also when "
                                       f"run alone (over simulator.scoring_cpu_s={self.budget.cpu_s:g} s or "
                                       f"scoring_mem_mb={self.budget.mem_mb} MB, or a crash); no coverage counted"))
        except Exception as exc:  # noqa: BLE001 - handed to the caller as the job's own error
            outer.set_exception(exc)
        finally:
            pool.shutdown(wait=True)
            (self._marks / token).unlink(missing_ok=True)

    def shutdown(self) -> None:
        if self._solo is not None:
            self._solo.shutdown(wait=True)
            self._solo = None
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._marks is not None:
            shutil.rmtree(self._marks, ignore_errors=True)
            self._marks = None

    def __getstate__(self) -> dict:  # a job context crosses to spawned ranks before any pool starts
        return {"workers": self.workers, "budget": self.budget}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["workers"], state["budget"])

    def __del__(self) -> None:  # an executor nobody shut down must not leave idle workers behind
        if getattr(self, "_pool", None) is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> "LocalExecutor":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()


def make_executor(sim: "SimConfig | None", workers: int | None = None) -> Executor:
    """The executor `sim.executor` names (None: local); `workers` sizes a local pool (Ray's size is the
    cluster's)."""
    if sim is not None and sim.executor == "ray":
        from .ray_executor import RayExecutor  # Ray is an optional extra; imported only when asked for
        return RayExecutor(sim.executor_address, sim.executor_cpus, sim.executor_memory_mb)
    budget = Budget(sim.scoring_mem_mb, sim.scoring_cpu_s) if sim is not None else None
    return LocalExecutor(workers, budget)
