"""Every temporary file of a run lives in ONE dir, and what a killed run leaves is removed by the next.

The first process of a run makes $TMPDIR/chorus-run-<pid>-<random>/ and points TMPDIR (and
`tempfile`) at it, so whatever it starts afterwards writes its temporaries there too: pool
workers and their work dirs, multiprocessing's pymp-* dirs, the runtime kit's build, the
compiler's cc*.s. Processes that inherit it (CHORUS_RUN_DIR, owner alive) use it as it is. The
owner removes it when it exits; a run killed with SIGKILL cannot, so every new run first sweeps
the per-run dirs whose owning process no longer exists (its jailed builds died with it:
PR_SET_PDEATHSIG, and unjailed ones with their keeper, process.run_limited).

Inside, each work dir is named after the process that owns it (chorus-<kind>-<pid>-<random>):
a pool worker killed mid-job leaves its dirs, which the next process of the run to start sweeps.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import tempfile
from pathlib import Path

_NAME = re.compile(r"^chorus-[a-z]+-(\d+)-")
RUN_ENV = "CHORUS_RUN_DIR"  # the run dir, for the processes a run starts
_ORIGINAL_ENV = "CHORUS_RUN_TMPDIR"  # the TMPDIR the run dir was made in (where stale runs lie)


def new_workdir(kind: str, keep: bool = False) -> Path:
    """A fresh dir in this run's dir; `keep` (simulator.keep_workdir): beside it instead, named
    chorus-kept-<kind>-..., so neither the run's exit nor a later sweep removes it."""
    root = run_dir()
    sweep_stale()
    if keep:
        return Path(tempfile.mkdtemp(prefix=f"chorus-kept-{kind}-{os.getpid()}-", dir=root.parent))
    return Path(tempfile.mkdtemp(prefix=f"chorus-{kind}-{os.getpid()}-", dir=root))


@functools.lru_cache(maxsize=1)
def run_dir() -> Path:
    """This run's temp dir, made (and TMPDIR pointed at it) on the first call of the run's first process."""
    inherited = os.environ.get(RUN_ENV)
    if inherited and Path(inherited).is_dir() and _owner_alive(Path(inherited).name):
        return Path(inherited)
    base = Path(os.environ.get(_ORIGINAL_ENV) or tempfile.gettempdir())
    _sweep(base)
    d = Path(tempfile.mkdtemp(prefix=f"chorus-run-{os.getpid()}-", dir=base))
    os.environ.update({RUN_ENV: str(d), _ORIGINAL_ENV: str(base), "TMPDIR": str(d)})
    tempfile.tempdir = str(d)
    _remove_at_exit(d)
    return d


def _remove_at_exit(d: Path) -> None:
    # After multiprocessing's own exit work, which stops the forkserver and removes its pymp-* dir
    # (priority -100) from inside this dir: a plain atexit hook registered now would run before it.
    from multiprocessing import util

    owner = os.getpid()

    def remove() -> None:
        if os.getpid() == owner:  # never a forked child's exit
            shutil.rmtree(d, ignore_errors=True)

    util.Finalize(None, remove, exitpriority=-1000)


@functools.lru_cache(maxsize=1)
def sweep_stale() -> int:
    """Remove the dirs of dead processes in this run's dir (workers killed mid-job)."""
    return _sweep(run_dir())


def _sweep(root: Path) -> int:
    removed = 0
    try:
        entries = list(root.iterdir())
    except OSError:
        return 0
    for d in entries:
        if not _NAME.match(d.name) or not d.is_dir() or _owner_alive(d.name):
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed += 1
    return removed


def _owner_alive(name: str) -> bool:
    m = _NAME.match(name)
    return m is None or _alive(int(m.group(1)))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
