"""simulator.executor=ray: the same scoring function as Ray tasks, on the cluster at
simulator.executor_address or on a local one started here. Tasks travel as pickled Task objects
(design files and testbench by content, no shared paths) with the caller's SimConfig, so each
simulation gets the same limits and isolation as in a local worker. A worker or node that dies
surfaces as an exception from the future, which pool.settled turns into harness_error."""
from __future__ import annotations

from concurrent.futures import Future
from typing import Callable


def _call(fn: Callable, *args):
    return fn(*args)


class RayExecutor:
    def __init__(self, address: str | None = None, cpus_per_task: float = 1.0):
        try:
            import ray
        except ImportError:
            raise ValueError("simulator.executor=ray needs Ray: pip install 'chorus[ray]'") from None
        self._ray = ray
        self._owns = not ray.is_initialized()
        if self._owns:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        # max_retries=0: a simulation that crashed its worker would crash the retry too
        self._task = ray.remote(num_cpus=cpus_per_task, max_retries=0)(_call)

    def submit(self, fn: Callable, *args) -> Future:
        return self._task.remote(fn, *args).future()

    def shutdown(self) -> None:
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns = False

    def __enter__(self) -> "RayExecutor":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
