"""Run a command in its own process group under resource limits and OS isolation, with a trimmed log."""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .worker_guard import die_with_parent
from .isolation import IsolationError, Policy, jail_prefix


JAIL_GRACE_S = 5.0

# What an unjailed command runs under: a shell that leads the command's process group and, when
# chorus dies (its PR_SET_PDEATHSIG is SIGTERM), kills the whole group, make's compilers included;
# a chorus killed with SIGKILL thus leaves no cc1plus behind. The trap is set before the command
# starts, so there is no window; the command's exit (or the signal that ended it) is the keeper's.
KEEPER = ('trap "kill -KILL 0" TERM; "$@" & c=$!; wait $c; s=$?; '
          'if [ $s -gt 128 ] && [ $s -lt 160 ]; then trap - TERM; kill -$((s - 128)) $$; fi; exit $s')


@dataclass
class RunOutcome:
    returncode: int | None
    timed_out: bool
    seconds: float
    log: str
    signal: int | None = None  # the signal that ended the command itself, as the jail saw it
    setup_error: str | None = None  # the jail could not set up a required layer; nothing ran
    over_disk: bool = False  # stopped because the dirs of `disk_quota` grew past its total
    scratch_bytes: int | None = None  # what the jail's scratch tmpfs held when the tree was gone (None: no tmpfs)
    log_bytes: int = 0  # the size of the log the command's output went to


@dataclass(frozen=True)
class Jail:
    """How to isolate one command: the mode (required | best_effort | off), where the jail
    binary is cached, and the policy (what it may read and write)."""
    mode: str
    cache_root: str
    policy: Policy


def run_limited(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float, log_path: Path,
                mem_mb: int, file_mb: int, cpu_s: float | None = None, jail: Jail | None = None,
                pass_fds: tuple[int, ...] = (), stdout_path: Path | None = None,
                disk_quota: tuple[int, tuple[Path, ...]] | None = None, progress: Path | None = None,
                total_timeout_s: float | None = None, cancel: threading.Event | None = None) -> RunOutcome:
    """Run `cmd` in its own process group with rlimits, isolated by `jail`; kill the whole
    tree on timeout. Returns only when every process of the command has exited.

    `disk_quota` (MB, dirs): a total for everything under those dirs (RLIMIT_FSIZE bounds each file
    only): a watcher sums them every DISK_POLL_S and kills the tree past it, so the overshoot is
    what the command can write in that time, and they are summed once more when it ends. (A run's own
    scratch dir is a tmpfs of exactly its quota; a build's output must outlive its jail, so it is
    watched instead.)

    `progress` (a file the command appends to as it finishes pieces of work, e.g. the programs of a
    batch): `timeout_s` then limits each piece, the time the file goes without growing, and
    `total_timeout_s` the whole command.

    `cancel`: once set (by another thread), the tree is killed; the caller knows why."""
    over_disk, done = threading.Event(), threading.Event()
    whole_s = max(0.001, total_timeout_s or timeout_s)  # a limit already spent still ends the command

    keeper = jail is None or jail.mode == "off"
    if keeper:
        cmd = ["/bin/sh", "-c", KEEPER, "chorus-keeper", *cmd]

    def limits() -> None:
        os.setsid()
        # Jailed: the jail has the signal and takes its whole tree down. Unjailed: the keeper does,
        # for the group, since make's compilers do not die with make.
        die_with_parent(signal.SIGTERM if keeper else signal.SIGKILL)
        mem = mem_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        fsz = file_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsz, fsz))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        cpu = int(cpu_s or timeout_s * 2 + 5)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))

    start = time.monotonic()
    fired = threading.Event()

    def kill_group(pid: int) -> None:
        fired.set()
        _killpg(pid)

    report_r = report_w = None
    if jail is not None and jail.mode != "off":
        report_r, report_w = os.pipe()
        try:
            cmd = [*jail_prefix(jail.mode, jail.cache_root, jail.policy, report_w, whole_s), *cmd]
        except IsolationError as exc:
            os.close(report_r)
            os.close(report_w)
            return RunOutcome(None, False, 0.0, "", None, str(exc))
    try:
        with open(log_path, "wb") as log, open(stdout_path or os.devnull, "wb") as out:
            # stdout joins the log unless the caller wants it whole (e.g. preprocessed source).
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=out if stdout_path else log,
                                    stderr=subprocess.STDOUT if stdout_path is None else log, preexec_fn=limits,
                                    pass_fds=(*pass_fds, *((report_w,) if report_w is not None else ())))
            if report_w is not None:
                os.close(report_w)
                report_w = None
            # A timer thread kills on timeout, so the wait itself blocks in waitpid: Popen.wait's
            # own timeout polls with sleeps, which cost tens of ms per short simulation.
            # A jail enforces the limit itself and returns only when the tree is dead; this timer
            # is then only the backstop for a jail that cannot.
            grace = JAIL_GRACE_S if report_r is not None else 0.0
            timer = threading.Timer(whole_s + grace, kill_group, args=(proc.pid,))
            timer.daemon = True
            timer.start()
            if progress is not None:
                threading.Thread(target=_watch_stall, daemon=True, args=(
                    progress, timeout_s, proc.pid, fired, done)).start()
            if cancel is not None:
                threading.Thread(target=_watch_cancel, daemon=True, args=(cancel, proc.pid, done)).start()
            if disk_quota is not None:
                threading.Thread(target=_watch_disk, daemon=True, args=(
                    disk_quota[1], disk_quota[0] << 20, proc.pid, over_disk, done)).start()
            try:
                proc.wait()
            finally:
                done.set()
                timer.cancel()
                _killpg(proc.pid)  # leftovers of the group (e.g. make's children)
                proc.wait()
            # A command that ends between two polls is measured once more: the total holds however
            # fast it wrote, not only while the watcher happened to look.
            if disk_quota is not None and not over_disk.is_set() and _over_quota(disk_quota[1], disk_quota[0] << 20):
                over_disk.set()
        report = _read_report(report_r) if report_r is not None else []
    finally:
        for fd in (report_r, report_w):
            if fd is not None:
                os.close(fd)
    kind, _, value = (report[0] if report else "").partition(" ")
    scratch = [int(v) for k, _, v in (line.partition(" ") for line in report[1:]) if k == "scratch" and v.isdigit()]
    timed_out = fired.is_set() or kind == "timeout"
    sig = int(value) if kind == "signal" and value.isdigit() else None
    if report_r is None and proc.returncode is not None and proc.returncode < 0:
        sig = -proc.returncode
    setup = value.strip() if kind == "setup" else None
    code = None if timed_out else (int(value) if kind == "exit" and value.isdigit() else proc.returncode)
    try:
        log_bytes = log_path.stat().st_size
    except OSError:
        log_bytes = 0
    return RunOutcome(code, timed_out, time.monotonic() - start, trim_log(log_path), sig, setup,
                      over_disk.is_set(), sum(scratch) if scratch else None, log_bytes)


DISK_POLL_S = 0.2
STALL_POLL_S = 0.02


def _watch_stall(path: Path, limit_s: float, pid: int, fired: threading.Event, done: threading.Event) -> None:
    """Kill the tree once `path` has not grown for `limit_s` (the piece in flight is over its time)."""
    size, since = -1, time.monotonic()
    while not done.wait(STALL_POLL_S):
        try:
            now_size = path.stat().st_size
        except OSError:
            now_size = -1
        if now_size != size:
            size, since = now_size, time.monotonic()
        elif time.monotonic() - since > limit_s:
            fired.set()
            _killpg(pid)
            return


def _watch_cancel(cancel: threading.Event, pid: int, done: threading.Event) -> None:
    while not done.is_set():
        if cancel.wait(STALL_POLL_S):
            _killpg(pid)
            return


def _watch_disk(dirs: tuple[Path, ...], limit: int, pid: int, over: threading.Event, done: threading.Event) -> None:
    while not done.wait(DISK_POLL_S):
        if _over_quota(dirs, limit):
            over.set()
            _killpg(pid)
            return


def _over_quota(dirs: tuple[Path, ...], limit: int) -> bool:
    return sum(tree_bytes(d) for d in dirs) > limit


def tree_bytes(root: Path) -> int:
    """What the files under `root` hold (allocated blocks, as du counts them)."""
    total, stack = 0, [str(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for e in entries:
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(e.path)
                        else:
                            total += e.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        continue
        except OSError:
            continue
    return total


def _read_report(fd: int) -> list[str]:
    """The jail's verdict line, then its `scratch` lines; every writer is gone by now, so this never blocks."""
    os.set_blocking(fd, False)
    try:
        data = os.read(fd, 4096)
    except BlockingIOError:
        data = b""
    return [line.strip() for line in data.decode("ascii", "replace").strip().splitlines()]


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def trim_log(path: Path, head: int = 6000, tail: int = 6000) -> str:
    """First and last few KB of a log: enough to diagnose, never gigabytes."""
    try:
        return trim_range(path, 0, path.stat().st_size, head, tail)
    except OSError:
        return ""


def trim_range(path: Path, start: int, end: int, head: int = 6000, tail: int = 6000) -> str:
    """trim_log of the bytes [start, end) of `path` (one program's part of a shared log)."""
    size = max(0, end - start)
    try:
        with open(path, "rb") as f:
            f.seek(start)
            if size <= head + tail:
                return f.read(size).decode("utf-8", "replace")
            first = f.read(head)
            f.seek(end - tail)
            last = f.read(tail)
    except OSError:
        return ""
    skipped = size - head - tail
    return (first.decode("utf-8", "replace") + f"\n... [{skipped} bytes trimmed] ...\n"
            + last.decode("utf-8", "replace"))
