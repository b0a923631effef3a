"""Every temporary file of a run lives in ONE dir, removed when the run ends, however it ends.

The first process of a run makes $TMPDIR/chorus-run-<pid>-<random>/ and every temporary chorus
makes goes there: pool workers' work dirs, the runtime kit's build, and the compilers'
temporaries (cc*.s: builds run with TMPDIR pointing at it, Toolchain.env). The process's own
TMPDIR is left as it is: multiprocessing and torch put sockets in it, and a socket's path is at
most 107 bytes, so nesting them deeper breaks a run whose TMPDIR is already long.

The owner removes the dir when it exits. A run killed with SIGKILL cannot, so a watcher process
started with the dir does: it holds the read end of a pipe only the owner writes to and, at the
end of file the owner's death gives, removes the run dir and multiprocessing's pymp-* dir of the
owner. Should the watcher die too, the next run sweeps per-run dirs whose owner no longer exists.
Processes the run starts (CHORUS_RUN_DIR, owner alive, same TMPDIR) use the dir as it is.

Inside, each work dir is named after the process that owns it (chorus-<kind>-<pid>-<random>):
a pool worker killed mid-job leaves its dirs, which the next process of the run to start sweeps.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_NAME = re.compile(r"^chorus-[a-z]+-(\d+)-")
RUN_ENV = "CHORUS_RUN_DIR"  # the run dir, for the processes a run starts
# The watcher: waits for the end of file on its stdin (the owner and all its holders of the pipe
# are gone), then removes what it was given. Its own session: a kill of the run's group spares it.
_WATCHER = "import shutil, sys\nsys.stdin.buffer.read()\nfor p in sys.argv[1:]: shutil.rmtree(p, True)\n"
_held: list[int] = []  # the run dir's watcher's pipe end, open until this process ends (or end_run)
_current: dict[str, Path] = {}  # "dir": this process's run dir, once made (a forked child shares it)


def new_workdir(kind: str, keep: bool = False) -> Path:
    """A fresh dir in this run's dir; `keep` (simulator.keep_workdir): beside it instead, named
    chorus-kept-<kind>-..., so neither the run's end nor a later sweep removes it."""
    root = run_dir()
    sweep_stale()
    if keep:
        return Path(tempfile.mkdtemp(prefix=f"chorus-kept-{kind}-{os.getpid()}-", dir=root.parent))
    return Path(tempfile.mkdtemp(prefix=f"chorus-{kind}-{os.getpid()}-", dir=root))


def run_dir() -> Path:
    """This run's temp dir, made on the first call of the run's first process (and again should the
    temp dir change under the process, as a test's does, or the dir be removed)."""
    base = Path(tempfile.gettempdir())
    d = _current.get("dir")
    if d is not None and d.parent == base and d.is_dir():
        return d
    inherited = os.environ.get(RUN_ENV)
    if inherited and Path(inherited).parent == base and Path(inherited).is_dir() and _owner_alive(Path(inherited).name):
        d = Path(inherited)
    else:
        _sweep(base)
        d = Path(tempfile.mkdtemp(prefix=f"chorus-run-{os.getpid()}-", dir=base))
        os.environ[RUN_ENV] = str(d)
        _remove_at_exit(d)
    _current["dir"] = d
    sweep_stale.cache_clear()
    return d


def end_run() -> None:
    """End this process's run dir now (its watcher removes it); the next new_workdir starts another."""
    d = _current.pop("dir", None)
    if d is not None:
        if os.environ.get(RUN_ENV) == str(d):
            del os.environ[RUN_ENV]
        shutil.rmtree(d, ignore_errors=True)
    while _held:
        end = _held.pop()
        if end >= 0:
            os.close(end)
    sweep_stale.cache_clear()


def _remove_at_exit(d: Path) -> None:
    from multiprocessing import util

    owner = os.getpid()
    _held.append(_watch(d))
    _watch_multiprocessing_dir()

    def remove() -> None:
        if os.getpid() == owner:  # never a forked child's exit
            shutil.rmtree(d, ignore_errors=True)

    util.Finalize(None, remove, exitpriority=-1000)


@functools.lru_cache(maxsize=1)
def _watch_multiprocessing_dir() -> int:
    """multiprocessing's pymp-* dir of this process, made now (where it would be made anyway) and
    watched for as long as the process lives: its forkserver's socket is in it. Only a dir this
    call makes is watched: one that exists already may be a forking parent's, still in use."""
    from multiprocessing import current_process, util

    if current_process()._config.get("tempdir") is not None:
        return -1
    return _watch(Path(util.get_temp_dir()))


def _watch(path: Path) -> int:
    """Start a watcher that removes `path` once the returned pipe end is closed; -1 if none could start."""
    read_end, write_end = os.pipe()  # not inherited by what this process executes
    try:
        subprocess.Popen([sys.executable, "-I", "-S", "-c", _WATCHER, str(path)], stdin=read_end,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        os.close(write_end)  # no watcher: the next run's sweep is what is left
        return -1
    finally:
        os.close(read_end)
    return write_end


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
