"""Evaluate many (task, testbench) pairs in parallel worker processes."""
from __future__ import annotations

from concurrent.futures import Future, as_completed
from contextlib import nullcontext
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Sequence

from ..core.task import Task
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


# Samples of one task scored by one job at most: enough to spread a process start over many
# programs, few enough that a handful of tasks still keeps every worker busy.
GROUP_MAX = 16


def submit_group(pool, fn_many: Callable, task: Task, items: Sequence, cfg: SimConfig,
                 fn_one: Callable | None = None) -> list[Future]:
    """One job scoring all `items` of one task (`fn_many(task, items, cfg)` returns a result per item),
    seen as one future per item: `settled` reads each as if it had been submitted alone.

    A group whose job killed its worker (also when the executor ran it again alone) is scored again
    one item per job with `fn_one(task, item, cfg)`, so only an item that kills a worker by itself
    is charged for it (executor.LocalExecutor); without `fn_one` each item reports the failure."""
    items = list(items)
    parts = [Future() for _ in items]
    for p in parts:
        p.set_running_or_notify_cancel()

    def one_by_one(exc: BaseException | None) -> None:
        if fn_one is None:
            for p in parts:
                p.set_exception(exc or RuntimeError("the group's scoring job returned no results"))
            return
        for p, item in zip(parts, items):
            pool.submit(fn_one, task, item, cfg).add_done_callback(lambda f, p=p: _copy(f, p))

    def spread(f: Future) -> None:
        try:
            results = f.result()
        except BrokenProcessPool as exc:
            one_by_one(exc)
            return
        except BaseException as exc:  # noqa: BLE001 - each part reports it, as `settled` expects
            for p in parts:
                p.set_exception(exc)
            return
        if not isinstance(results, list) or len(results) != len(items):
            one_by_one(None)  # the executor charged the whole group when it died alone: split it
            return
        for p, r in zip(parts, results):
            p.set_result(r)

    pool.submit(fn_many, task, items, cfg).add_done_callback(spread)
    return parts


def _copy(src: Future, dst: Future) -> None:
    exc = src.exception()
    dst.set_exception(exc) if exc is not None else dst.set_result(src.result())


def evaluate_many(jobs: Sequence[tuple[Task, str | None]], cfg: SimConfig | None = None,
                  workers: int | None = None,
                  on_result: Callable[[int, SimResult], None] | None = None,
                  fn: Callable[[Task, str | None, SimConfig], SimResult] = simulate,
                  executor: Executor | None = None,
                  fn_many: Callable[[Task, list, SimConfig], list[SimResult]] | None = None) -> list[SimResult]:
    """Results in job order. `on_result(index, result)` fires as each one finishes. Jobs go to
    `executor` when given (it stays open), else to a local pool of `workers` made for this call.

    `fn` scores one job (default: a whole testbench); it must be picklable, e.g. a
    functools.partial of a module-level function. With `fn_many` (scores a list of one task's
    jobs, e.g. formats.score_many), the jobs of each task go to one worker together."""
    cfg = cfg or SimConfig()
    workers = workers or default_workers()
    results: list[SimResult | None] = [None] * len(jobs)
    groups: list[list[int]] = [[i] for i in range(len(jobs))]
    if fn_many is not None:
        by_task: dict[int, list[int]] = {}
        for i, (task, _) in enumerate(jobs):
            by_task.setdefault(id(task), []).append(i)
        groups = [idx[k:k + GROUP_MAX] for idx in by_task.values() for k in range(0, len(idx), GROUP_MAX)]
    if executor is None and (workers == 1 or len(groups) <= 1):
        for idx in groups:
            task, items = jobs[idx[0]][0], [jobs[i][1] for i in idx]
            for i, r in zip(idx, fn_many(task, items, cfg) if fn_many else [fn(task, items[0], cfg)]):
                results[i] = r
                if on_result:
                    on_result(i, r)
        return results  # type: ignore[return-value]
    with nullcontext(executor) if executor else LocalExecutor(workers) as pool:
        futures = {}
        for idx in groups:
            task, items = jobs[idx[0]][0], [jobs[i][1] for i in idx]
            parts = (submit_group(pool, fn_many, task, items, cfg, fn) if fn_many
                     else [pool.submit(fn, task, items[0], cfg)])
            futures.update(zip(parts, idx))
        for fut in as_completed(futures):
            i = futures[fut]
            results[i] = settled(fut)  # a dead worker: harness_error for the jobs it took down
            if on_result:
                on_result(i, results[i])
    return results  # type: ignore[return-value]
