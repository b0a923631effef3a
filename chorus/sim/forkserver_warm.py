"""Imported into the multiprocessing forkserver that a run starts (LocalExecutor preloads it): the
toolchain is found there once (~75 ms: `verilator --version` and the SMT solver's), so every worker
forked from it starts with it instead of finding it again, in each new pool."""
from .toolchain import find_toolchain

try:
    find_toolchain()
except Exception:  # noqa: BLE001 - the forkserver must start whatever happens; a job that needs it reports why
    pass
