"""Temporary work dirs that a killed chorus leaves behind are removed by the next one.

Each dir is named after the process that owns it (chorus-<kind>-<pid>-<random>). The first
call in a process sweeps the dirs of processes that no longer exist: a worker killed with
SIGKILL cannot clean up after itself, and its jailed builds died with it (PR_SET_PDEATHSIG).
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import tempfile
from pathlib import Path

_NAME = re.compile(r"^chorus-[a-z]+-(\d+)-")


def new_workdir(kind: str) -> Path:
    sweep_stale()
    return Path(tempfile.mkdtemp(prefix=f"chorus-{kind}-{os.getpid()}-"))


@functools.lru_cache(maxsize=1)
def sweep_stale() -> int:
    removed = 0
    root = Path(tempfile.gettempdir())
    try:
        entries = list(root.iterdir())
    except OSError:
        return 0
    for d in entries:
        m = _NAME.match(d.name)
        if not m or not d.is_dir() or _alive(int(m.group(1))):
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
