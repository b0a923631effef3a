"""Run a built simulation inside the jail and score the DUT's coverage from what it returned.

The simulated process is untrusted (it runs the testbench's compiled code). It gets a fresh
tmpfs as its working directory (its whole disk: simulator.run_write_mb, plus room for the coverage
the driver stages there) and may read only the toolchain, its binary and its inputs; what its files
held when it ended, with its output, is judged against that budget. Coverage and status come back
through one descriptor that chorus opened before the jail started, as one frame written at the very
end (csrc/chorus_main.cpp); they are read only after the jail reports the whole process tree dead.
A run that ends by a signal is never `ok`, and a stream that is not exactly one well-formed frame is
refused.
"""
from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from ..core.task import Task
from .config import SimConfig
from .coverage import CoverageFormatError, Point, compute_metrics, parse_coverage_text
from .design import find_dut_instance, source_name
from .design_check import design_sources
from .isolation import Policy
from .process import Jail, RunOutcome, run_limited
from .result import SimResult
from .toolchain import solver_env

_HEAD = re.compile(rb"chorus-result 1\nstatus (\{[^\n]{0,400}\})\ncoverage (\d{1,10})\n")
_BEGIN = re.compile(rb"begin (\d{1,9})\n")
RESULT_FILE = "result"


@dataclass
class RunRecord:
    """What the simulated process returned for one program: its end reason, coverage text and the
    byte range of the shared log its output fills; or why not."""
    end: str | None
    coverage: str | None
    problem: str | None = None
    log: tuple[int, int] | None = None
    scratch: int | None = None  # what the program's files held when it ended (its driver measured it)


def parse_result_stream(data: bytes) -> tuple[list[RunRecord], bool]:
    """The records of the programs that finished, in order, and whether one more had begun (it was
    in flight when the stream ended). Each program writes `begin <i>` and then one frame
    (csrc/chorus_main.cpp); anything else ends the stream there: the program it belongs to has a
    record with a `problem`, and nothing after it is read."""
    records, at = [], 0
    while at < len(data):
        b = _BEGIN.match(data, at)
        if not b or int(b.group(1)) != len(records):
            records.append(RunRecord(None, None, "the result stream is malformed"))
            return records, False
        at = b.end()
        if at == len(data):
            return records, True
        m = _HEAD.match(data, at)
        if not m:
            records.append(RunRecord(None, None, "the result stream is malformed"))
            return records, False
        n = int(m.group(2))
        body = data[m.end():m.end() + n]
        if len(body) != n or data[m.end() + n:m.end() + n + 4] != b"end\n":
            records.append(RunRecord(None, None, "the result stream has extra or missing bytes (written twice?)"))
            return records, False
        at = m.end() + n + 4
        try:
            status = json.loads(m.group(1))
        except json.JSONDecodeError:
            records.append(RunRecord(None, None, "the result status is malformed"))
            return records, False
        end, log, scratch = status.get("end"), status.get("log"), status.get("scratch")
        span = (int(log[0]), int(log[1])) if isinstance(log, list) and len(log) == 2 and all(
            isinstance(x, int) and x >= 0 for x in log) else None
        records.append(RunRecord(end if isinstance(end, str) else None, body.decode("utf-8", "replace"), log=span,
                                 scratch=scratch if isinstance(scratch, int) and scratch >= 0 else None))
    return records, False


def parse_result_frame(data: bytes) -> RunRecord:
    """The one program of a solo run: exactly one `begin` and one frame, or why not."""
    records, in_flight = parse_result_stream(data)
    if not records:
        return RunRecord(None, None, "no result written")
    if len(records) > 1 or in_flight:
        return RunRecord(None, None, "the result stream has extra or missing bytes (written twice?)")
    return records[0]


def jail_for(cfg: SimConfig, cache_root: Path, policy: Policy) -> Jail:
    return Jail(cfg.isolation, str(cache_root), policy)


def scratch_policy(cfg: SimConfig, run: Path, read: tuple[str, ...], write: tuple[str, ...] = ()) -> Policy:
    """What a run may touch (every format): read the toolchain and `read`, write `write` (files the
    caller reads afterwards) and its working directory `run`, a fresh tmpfs of the run's write budget
    plus room for the coverage the driver stages there (one file: at most output_limit_mb) and 1 MB,
    so a run that fills it is over its budget, and is seen to be."""
    return Policy(read=read, write=write, scratch=str(run), quota_mb=cfg.run_write_mb + cfg.output_limit_mb + 1,
                  chdir=str(run), strict=True)


def launch(cfg: SimConfig, cache_root: Path, binary: Path, args: list[str], run: Path, out: Path,
           env: dict[str, str], policy: Policy, pass_fds: tuple[int, ...] = (), progress: Path | None = None,
           programs: int = 1) -> RunOutcome:
    """One jailed simulation of `binary` in `run`, under the simulator's limits (every format). A
    process of several programs has each one's limits: wall clock per program (`progress` is the
    file that grows as each ends), CPU for all of them."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(run), "LANG": "C", **solver_env(), **env}
    cmd = [str(binary), f"+verilator+error+limit+{cfg.error_limit}", "+verilator+seed+1", *args]
    return run_limited(cmd, cwd=run, env=env, timeout_s=cfg.run_timeout_s, log_path=out / "sim.log",
                       mem_mb=cfg.mem_limit_mb, file_mb=cfg.output_limit_mb, cpu_s=(cfg.run_timeout_s + 5) * programs,
                       jail=jail_for(cfg, cache_root, policy), pass_fds=pass_fds, progress=progress,
                       total_timeout_s=(cfg.run_timeout_s * programs + 5) if programs > 1 else None)


def run_binary(cfg: SimConfig, cache_root: Path, binary: Path, workdir: Path,
               inputs: list[dict[str, str]]) -> tuple[RunOutcome, bytes]:
    """Run `binary` over len(inputs) programs (at least one) with `workdir/run` as a fresh tmpfs;
    program i reads its `inputs[i]` as `../in/<i>/<name>`. Returns the outcome and the result stream
    as written (the caller decides what a timed-out or unstarted run's stream is worth)."""
    run, inp, out = workdir / "run", workdir / "in", workdir / "out"
    for d in (run, inp, out):
        d.mkdir(exist_ok=True)
    for i, files in enumerate(inputs):
        (inp / str(i)).mkdir()
        for name, text in files.items():
            (inp / str(i) / name).write_text(text)
    policy = scratch_policy(cfg, run, (str(binary.parent), str(inp)))
    n = len(inputs)
    fd = os.open(out / RESULT_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        env = {"CHORUS_MAX_TIME_NS": repr(float(cfg.max_sim_time_ns)), "CHORUS_RESULT_FD": str(fd),
               "CHORUS_PROGRAMS": str(n)}
        r = launch(cfg, cache_root, binary, [], run, out, env, policy, pass_fds=(fd,),
                   progress=out / RESULT_FILE if n > 1 else None, programs=n)
    finally:
        os.close(fd)
    return r, (out / RESULT_FILE).read_bytes()


def run_solo(cfg: SimConfig, cache_root: Path, binary: Path, workdir: Path,
             inputs: dict[str, str] | None = None) -> tuple[RunOutcome, RunRecord]:
    """One program: its outcome and record (no record when it timed out or could not start)."""
    r, data = run_binary(cfg, cache_root, binary, workdir, [inputs or {}])
    if r.timed_out or r.setup_error:
        return r, RunRecord(None, None)
    return r, parse_result_frame(data)


def score_run(task: Task, cfg: SimConfig, r: RunOutcome, rec: RunRecord, facts, seconds: dict,
              build_log: str = "") -> SimResult:
    """The SimResult of one finished run: its status and the DUT instance's coverage."""
    seconds["run"] = round(r.seconds, 4)
    logs = {"build_log": build_log, "run_log": r.log, "seconds": seconds}
    if r.setup_error:
        return SimResult("harness_error", f"isolation could not be set up: {r.setup_error}", **logs)
    if (why := over_write_budget(cfg, r, rec)) is not None:
        return SimResult("runtime_error", why, **logs)
    if r.timed_out:
        return SimResult("timeout", f"simulation did not end within {cfg.run_timeout_s:.0f} s wall clock "
                         "(a zero-delay loop?)", **logs)
    if r.signal is not None:
        hint = {9: " (memory, CPU or wall-clock limit?)", 25: " (output limit?)", 31: " (forbidden system call)",
                13: "" if solver_env() else " (randomize() with constraints needs the SMT solver z3: "
                                            "pip install z3-solver)"}
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


def over_write_budget(cfg: SimConfig, r: RunOutcome, rec: RunRecord) -> str | None:
    """Why the run is over simulator.run_write_mb, or None: what its files held when it ended (the
    driver's count for its program, else the jail's of the scratch tmpfs) plus its output."""
    files = rec.scratch if rec.scratch is not None else r.scratch_bytes
    output = rec.log[1] - rec.log[0] if rec.log else r.log_bytes
    written = (files or 0) + output
    if written <= cfg.run_write_mb << 20:
        return None
    return (f"the run wrote {written / (1 << 20):.1f} MB (files and output), over simulator.run_write_mb="
            f"{cfg.run_write_mb} MB; its files were removed and no coverage counted")


def score_points(task: Task, points: list[Point], facts) -> SimResult:
    """Coverage of the DUT instance's subtree, attributed by source: a point is the design's when it
    comes from the task's own SystemVerilog files (which the testbench cannot write or re-map:
    design_check.design_sources), and the DUT instance is a path holding points from the top
    module's declaration there. No module name decides it (a testbench names its own modules, and
    Verilator names parameter-specialised copies `<module>__<params>`), so every copy of a design
    module under the DUT counts and no testbench module ever does."""
    sources = design_sources(task)
    own = [p for p in points if source_name(p.file) in sources]
    paths = {p.hier for p in own if facts.in_module(task.top, p.file, p.line)}
    path, instance_ok = find_dut_instance(paths, task.instance)
    if path is None:
        return SimResult("ok", f"no coverage points of module {task.top}: it is not instantiated, or nothing in "
                         "it can ever change (all inputs tied to constants) and Verilator removed it")
    report = compute_metrics(own, path, instance_ok, facts.unpacked, task.rtl)
    reason = "" if instance_ok else f"DUT not instantiated as '{task.instance}'; scored {path} instead"
    return SimResult("ok", reason, report)
