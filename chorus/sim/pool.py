"""Evaluate many (task, testbench) pairs in parallel worker processes."""
from __future__ import annotations

from concurrent.futures import as_completed
from contextlib import nullcontext
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Sequence

from ..tasks.schema import Task
from .config import SimConfig
from .executor import Executor, LocalExecutor, default_workers
from .result import SimResult
from .simulate import simulate


# Workers start through forkserver, which re-imports a calling script's top level.
_HINT = " (a script that evaluates in parallel must guard its top level with `if __name__ == '__main__':`)"


def make_pool(workers: int | None = None) -> LocalExecutor:
    """A worker pool for callers that submit as they go (e.g. while a model is still generating)."""
    return LocalExecutor(workers)


def settled(fut) -> SimResult:
    """A submitted job's result; a worker that died or raised becomes `harness_error` for that
    sample alone, so one crashed simulation never aborts a step or an evaluation."""
    try:
        return fut.result()
    except BrokenProcessPool as exc:
        return SimResult("harness_error", f"worker process died: {exc}{_HINT}")
    except Exception as exc:  # a bug in chorus, not in the testbench
        return SimResult("harness_error", f"{type(exc).__name__}: {exc}")


def evaluate_many(jobs: Sequence[tuple[Task, str | None]], cfg: SimConfig | None = None,
                  workers: int | None = None,
                  on_result: Callable[[int, SimResult], None] | None = None,
                  fn: Callable[[Task, str | None, SimConfig], SimResult] = simulate,
                  executor: Executor | None = None) -> list[SimResult]:
    """Results in job order. `on_result(index, result)` fires as each one finishes. Jobs go to
    `executor` when given (it stays open), else to a local pool of `workers` made for this call.

    `fn` scores one job (default: a whole testbench); it must be picklable, e.g. a
    functools.partial of a module-level function."""
    cfg = cfg or SimConfig()
    workers = workers or default_workers()
    results: list[SimResult | None] = [None] * len(jobs)
    if executor is None and (workers == 1 or len(jobs) <= 1):
        for i, (task, tb) in enumerate(jobs):
            results[i] = fn(task, tb, cfg)
            if on_result:
                on_result(i, results[i])
        return results  # type: ignore[return-value]
    with nullcontext(executor) if executor else LocalExecutor(workers) as pool:
        futures = {pool.submit(fn, task, tb, cfg): i for i, (task, tb) in enumerate(jobs)}
        for fut in as_completed(futures):
            i = futures[fut]
            results[i] = settled(fut)  # a dead worker: harness_error for the jobs it took down
            if on_result:
                on_result(i, results[i])
    return results  # type: ignore[return-value]
