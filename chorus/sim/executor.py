"""Where simulations run: one small interface (submit, shutdown) chosen by `simulator.executor`.

Callers create one executor and pass it down (RL, OPD, SFT data, evaluation); results are read
with `pool.settled`, which turns a dead or raising worker into `harness_error` for that sample."""
from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Callable, Protocol

if TYPE_CHECKING:
    from .config import SimConfig


class Executor(Protocol):
    def submit(self, fn: Callable, *args) -> Future: ...

    def shutdown(self) -> None: ...


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


class LocalExecutor:
    """Today's forkserver process pool (workers must not inherit a parent's torch threads or open
    model files). A worker that dies breaks a ProcessPoolExecutor for good; the broken pool's
    in-flight futures report it, and the next submit starts a fresh pool, so a long RL run
    outlives one crashed simulation."""

    def __init__(self, workers: int | None = None):
        self.workers = workers or default_workers()
        self._pool: ProcessPoolExecutor | None = None

    def _fresh(self) -> ProcessPoolExecutor:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=mp.get_context("forkserver"))
        return self._pool

    def submit(self, fn: Callable, *args) -> Future:
        pool = self._pool or self._fresh()
        try:
            return pool.submit(fn, *args)
        except BrokenProcessPool:
            return self._fresh().submit(fn, *args)

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __getstate__(self) -> dict:  # a job context crosses to spawned ranks before any pool starts
        return {"workers": self.workers, "_pool": None}

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
    return LocalExecutor(workers)
