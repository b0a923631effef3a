"""simulator.executor=ray: the same scoring function as Ray tasks, on the cluster at
simulator.executor_address or on a local one started here.

Jobs travel by value: a Task holds its design files' text, the testbench is a string and the
SimConfig rides along, so a node needs no shared filesystem, and each simulation runs the same
`simulate` with the same limits and OS isolation as in a local worker (every node needs chorus and
Verilator installed, the same versions as the driver's). Each task reserves simulator.executor_cpus
(and executor_memory_mb when set), so Ray never packs more simulations on a node than it has cores.
A worker or node that dies surfaces as an exception from the future, which pool.settled turns into
harness_error for that sample. The cluster is joined at the first submit, so an executor crosses
to spawned processes (DDP ranks) before it connects."""
from __future__ import annotations

import socket
from concurrent.futures import Future
from typing import Callable

_REACH_S = 5.0


def _check_reachable(address: str | None) -> None:
    """Fail in seconds on a host:port nothing listens at: ray.init would retry it for minutes."""
    if address in (None, "auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=_REACH_S).close()
    except (OSError, ValueError) as exc:
        raise ValueError(f"simulator.executor_address={address!r}: no Ray cluster answers there ({exc}); start "
                         "one with `ray start --head` or set simulator.executor_address=null for a local one") from None


def _call(fn: Callable, *args):
    return fn(*args)


class RayExecutor:
    def __init__(self, address: str | None = None, cpus: float = 1.0, memory_mb: int | None = None):
        try:
            import ray  # noqa: F401
        except ImportError:
            raise ValueError("simulator.executor=ray needs Ray: pip install 'chorus[ray]'") from None
        if cpus <= 0:
            raise ValueError(f"simulator.executor_cpus must be > 0, got {cpus}")
        self.address, self.cpus, self.memory_mb = address, cpus, memory_mb
        self._task = None
        self._owns = False  # whether this executor started (and so must stop) the Ray connection

    def _connect(self):
        import ray

        if not ray.is_initialized():
            _check_reachable(self.address)
            try:
                ray.init(address=self.address, include_dashboard=False, log_to_driver=False)
            except ConnectionError as exc:  # its cause says why (e.g. the cluster's auth token is missing)
                why = str(exc.__cause__ or exc).strip().splitlines()[-1][:200]
                raise ValueError(f"simulator.executor_address={self.address!r}: cannot join the Ray cluster there "
                                 f"({why}); check the address and the cluster's token (RAY_AUTH_TOKEN), or set "
                                 "simulator.executor_address=null for a local one") from None
            self._owns = True
        hints = {"num_cpus": self.cpus}
        if self.memory_mb:
            hints["memory"] = int(self.memory_mb * 2**20)
        # max_retries=0: a simulation that crashed its worker would crash the retry too
        self._task = ray.remote(max_retries=0, **hints)(_call)
        return self._task

    def submit(self, fn: Callable, *args) -> Future:
        return (self._task or self._connect()).remote(fn, *args).future()

    def shutdown(self) -> None:
        if self._owns:
            import ray

            ray.shutdown()
        self._task, self._owns = None, False

    def __getstate__(self) -> dict:  # a spawned process joins the cluster itself, at its first submit
        return {**self.__dict__, "_task": None, "_owns": False}

    def __enter__(self) -> "RayExecutor":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
