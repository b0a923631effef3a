"""Run a built simulation inside the jail and score the DUT's coverage from what it returned.

The simulated process is untrusted (it runs the testbench's compiled code). It gets a fresh
tmpfs as its working directory (its whole disk quota) and may read only the toolchain, its
binary and its inputs. Coverage and status come back through one descriptor that chorus opened
before the jail started, as one frame written at the very end (csrc/chorus_main.cpp); they are
read only after the jail reports the whole process tree dead. A run that ends by a signal is
never `ok`, and a stream that is not exactly one well-formed frame is refused.
"""
from __future__ import annotations

import json
import os
import re
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from ..tasks.schema import Task
from .config import SimConfig
from .coverage import CoverageFormatError, Point, compute_metrics, parse_coverage_text
from .design import find_dut_instance
from .isolation import Policy
from .process import Jail, RunOutcome, run_limited
from .result import SimResult

_HEAD = re.compile(rb"chorus-result 1\nstatus (\{[^\n]{0,400}\})\ncoverage (\d{1,10})\n")
RESULT_FILE = "result"


@dataclass
class RunRecord:
    """What the simulated process returned: its end reason and coverage text, or why not."""
    end: str | None
    coverage: str | None
    problem: str | None = None


def parse_result_frame(data: bytes) -> RunRecord:
    if not data:
        return RunRecord(None, None, "no result written")
    m = _HEAD.match(data)
    if not m:
        return RunRecord(None, None, "the result stream is malformed")
    n = int(m.group(2))
    body = data[m.end():m.end() + n]
    tail = data[m.end() + n:]
    if len(body) != n or tail != b"end\n":
        return RunRecord(None, None, "the result stream has extra or missing bytes (written twice?)")
    try:
        end = json.loads(m.group(1)).get("end")
    except json.JSONDecodeError:
        return RunRecord(None, None, "the result status is malformed")
    return RunRecord(end if isinstance(end, str) else None, body.decode("utf-8", "replace"))


def jail_for(cfg: SimConfig, cache_root: Path, policy: Policy) -> Jail:
    return Jail(cfg.isolation, str(cache_root), policy)


def launch(cfg: SimConfig, cache_root: Path, binary: Path, args: list[str], run: Path, out: Path,
           env: dict[str, str], policy: Policy, pass_fds: tuple[int, ...] = ()) -> RunOutcome:
    """One jailed simulation of `binary` in `run`, under the simulator's limits (every format)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(run), "LANG": "C", **env}
    cmd = [str(binary), f"+verilator+error+limit+{cfg.error_limit}", "+verilator+seed+1", *args]
    return run_limited(cmd, cwd=run, env=env, timeout_s=cfg.run_timeout_s, log_path=out / "sim.log",
                       mem_mb=cfg.mem_limit_mb, file_mb=cfg.output_limit_mb, cpu_s=cfg.run_timeout_s + 5,
                       jail=jail_for(cfg, cache_root, policy), pass_fds=pass_fds)


def run_binary(cfg: SimConfig, cache_root: Path, binary: Path, workdir: Path,
               inputs: dict[str, str]) -> tuple[RunOutcome, RunRecord]:
    """Run `binary` with `workdir/run` as a fresh tmpfs and `inputs` readable in `workdir/in`."""
    run, inp, out = workdir / "run", workdir / "in", workdir / "out"
    for d in (run, inp, out):
        d.mkdir(exist_ok=True)
    for name, text in inputs.items():
        (inp / name).write_text(text)
    policy = Policy(read=(str(binary.parent), str(inp)), scratch=str(run), quota_mb=cfg.disk_quota_mb,
                    chdir=str(run), strict=True)
    fd = os.open(out / RESULT_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        env = {"CHORUS_MAX_TIME_NS": repr(float(cfg.max_sim_time_ns)), "CHORUS_RESULT_FD": str(fd)}
        r = launch(cfg, cache_root, binary, [], run, out, env, policy, pass_fds=(fd,))
    finally:
        os.close(fd)
    if r.timed_out or r.setup_error:
        return r, RunRecord(None, None)
    return r, parse_result_frame((out / RESULT_FILE).read_bytes())


def score_run(task: Task, cfg: SimConfig, r: RunOutcome, rec: RunRecord, facts, seconds: dict,
              build_log: str = "") -> SimResult:
    """The SimResult of one finished run: its status and the DUT instance's coverage."""
    seconds["run"] = round(r.seconds, 4)
    logs = {"build_log": build_log, "run_log": r.log, "seconds": seconds}
    if r.setup_error:
        return SimResult("harness_error", f"isolation could not be set up: {r.setup_error}", **logs)
    if r.timed_out:
        return SimResult("timeout", f"simulation did not end within {cfg.run_timeout_s:.0f} s wall clock "
                         "(a zero-delay loop?)", **logs)
    if r.signal is not None:
        hint = {9: " (memory, CPU or wall-clock limit?)", 25: " (output limit?)", 31: " (forbidden system call)"}
        return SimResult("runtime_error", f"simulation was killed by signal {r.signal}"
                         f"{hint.get(r.signal, '')}; no coverage counted", **logs)
    if rec.problem or rec.end is None or rec.coverage is None:
        why = rec.problem or "no result written"
        return SimResult("runtime_error", f"simulation ended with exit code {r.returncode} and {why}; "
                         "no coverage counted", **logs)
    t = time.monotonic()
    try:
        points = parse_coverage_text(rec.coverage)
    except CoverageFormatError as exc:
        return SimResult("runtime_error", f"unreadable coverage: {exc}", **logs)
    result = score_points(task, points, facts)
    if rec.end == "output_limit":
        result.status, result.reason = "runtime_error", (f"output limit of {cfg.output_limit_mb} MB exceeded; "
                                                         "simulation stopped early (coverage kept)")
    elif rec.end == "fatal":
        result.status, result.reason = "runtime_error", "simulation aborted on a fatal error (coverage kept)"
    seconds["coverage"] = round(time.monotonic() - t, 4)
    result.end, result.build_log, result.run_log, result.seconds = rec.end, build_log, r.log, seconds
    return result


def score_points(task: Task, points: list[Point], facts) -> SimResult:
    """Coverage of the DUT instance's subtree: every point of every module copy under it.

    Points are attributed by instance path, and each point's module is mapped back to the design
    module it was specialised from (facts.origin), so parameter-specialised submodules and a DUT
    renamed by a testbench's parameter override count like the plain module."""
    modules: dict[str, set[str]] = defaultdict(set)
    origin = {m: facts.origin(m) for m in {p.module for p in points}} if facts.modules else {}
    for p in points:
        modules[p.hier].add(origin.get(p.module, p.module))
    path, instance_ok = find_dut_instance(modules, task.top, task.instance)
    if path is None:
        return SimResult("ok", f"no coverage points of module {task.top}: it is not instantiated, or nothing in "
                         "it can ever change (all inputs tied to constants) and Verilator removed it")
    own = [p for p in points if origin[p.module] is not None] if origin else points
    report = compute_metrics(own, path, instance_ok, facts.unpacked, task.rtl)
    reason = "" if instance_ok else f"DUT not instantiated as '{task.instance}'; scored {path} instead"
    return SimResult("ok", reason, report)
