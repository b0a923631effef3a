"""Run many programs through one prebuilt harness in one simulator process, each scored as if alone.

A process start, the jail and the model's construction cost more than a short simulation, so the
programs of a batch share one process (csrc/chorus_main.cpp: CHORUS_PROGRAMS). Each gets a new
Verilator context and model and an emptied working directory, so what it computes cannot depend on
the programs before it. What a batch cannot make identical is settled by running alone:
- a program in flight when the process died (a crash, a memory or CPU limit) is run again by itself,
  and that run's result is its result; the programs after it go on in a new batch;
- a program past the output limit after other programs wrote to the shared log is run alone too
  (its output alone might have fitted); so is one whose frame is malformed;
- a program over its wall-clock time (run_timeout_s, counted from its own start) is a timeout, as
  alone: the stall watch (process.run_limited `progress`) kills the batch, the rest go on.
"""
from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path

from .config import SimConfig
from .execute import RunRecord, parse_result_stream, run_binary, run_solo
from .process import RunOutcome, trim_range
from .workdirs import new_workdir

Settled = tuple[RunOutcome, RunRecord]
_ALONE, _NOT_BEGUN = "alone", "not begun"


def run_programs(cfg: SimConfig, cache_root: Path, binary: Path, inputs: list[dict[str, str]]) -> list[Settled]:
    """Run `binary` once per entry of `inputs` (program i reads its files as `../in/<i>/<name>`) in as
    few processes as the programs allow; one (outcome, record) per program, in order."""
    results: dict[int, Settled] = {}
    pending = list(range(len(inputs)))
    while pending:
        if len(pending) == 1:
            results[pending[0]] = _solo(cfg, cache_root, binary, inputs[pending[0]])
            break
        verdicts = _batch(cfg, cache_root, binary, [inputs[i] for i in pending])
        for i, v in zip(pending, verdicts):
            if v == _ALONE:
                results[i] = _solo(cfg, cache_root, binary, inputs[i])
            elif v != _NOT_BEGUN:
                results[i] = v
        rest = [i for i, v in zip(pending, verdicts) if v == _NOT_BEGUN]
        if len(rest) == len(pending):  # nothing began (a fresh process always begins): settle one alone
            results[rest[0]] = _solo(cfg, cache_root, binary, inputs[rest[0]])
            rest = rest[1:]
        pending = rest
    return [results[i] for i in range(len(inputs))]


@contextmanager
def _workdir(cfg: SimConfig):
    workdir = new_workdir("run", cfg.keep_workdir)
    try:
        yield workdir
    finally:
        if not cfg.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def _solo(cfg: SimConfig, cache_root: Path, binary: Path, files: dict[str, str]) -> Settled:
    with _workdir(cfg) as workdir:
        return run_solo(cfg, cache_root, binary, workdir, files)


def _batch(cfg: SimConfig, cache_root: Path, binary: Path, inputs: list[dict[str, str]]) -> list:
    """One process over several programs. Per program: its (outcome, record), _ALONE or _NOT_BEGUN."""
    with _workdir(cfg) as workdir:
        r, data = run_binary(cfg, cache_root, binary, workdir, inputs)
        if r.setup_error:
            return [(r, RunRecord(None, None))] * len(inputs)
        records, in_flight = parse_result_stream(data)
        each = r.seconds / max(1, len(records) + in_flight)
        verdicts: list = []
        for j, rec in enumerate(records):
            if rec.problem is not None or (rec.end == "output_limit" and j > 0):
                verdicts.append(_ALONE)
                break
            log = trim_range(workdir / "out" / "sim.log", *rec.log) if rec.log else ""
            verdicts.append((RunOutcome(0, False, each, log), rec))
        if len(verdicts) == len(records) and in_flight:
            # over its own wall-clock time, it is a timeout as alone; any other death is run again alone
            verdicts.append((RunOutcome(None, True, each, ""), RunRecord(None, None)) if r.timed_out else _ALONE)
        return verdicts + [_NOT_BEGUN] * (len(inputs) - len(verdicts))
