"""The stimulus-format registry: a format turns a completion into a simulation and a stimulus
program into a reference completion. A new format is one entry here plus conf/format/<name>.yaml.

- testbench: a whole SystemVerilog testbench (CVDP-faithful).
- body:      stimulus statements on canonical aliases, placed in a chorus-built skeleton.
- vectors:   stimulus as data (see program.py) for a harness compiled once per design.
- cocotb:    a cocotb test module on the aliases, against the DUT built once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..core.task import Task
from ..sim import SimConfig, SimResult, simulate
from ..sim.prebuilt import run_harness_many
from ..sim.svlex import tokenize
from . import cocotb_stimulus
from .aliases import ALIAS_NAME, AliasMap, alias_map
from .program import Program, VectorsError, expand, parse_vectors, render_vectors
from .skeleton import body_testbench, render_body, vectors_harness



@dataclass(frozen=True)
class Format:
    name: str
    score: Callable[[Task, str | None, SimConfig, dict], SimResult]
    render: Callable[[Task, Program, dict], str]
    # Several samples of one task at once, each result what `score` gives it (None: one at a time).
    score_many: Callable[[Task, list[str | None], SimConfig, dict], list[SimResult]] | None = None


def _testbench_score(task, completion, cfg, opts):
    return simulate(task, completion, cfg)


def _testbench_render(task, program, opts):
    return body_testbench(task, alias_map(task), render_body(program, alias_map(task)), **_body_opts(opts))


def _body_opts(opts: dict) -> dict:
    return {k: opts[k] for k in ("reset_cycles", "max_time_ns") if k in opts}


def check_body(body: str, amap: AliasMap) -> SimResult | None:
    """Unknown aliases and stimulus-free bodies are answered before any build."""
    tokens = tokenize(body or "")
    known = {a.alias for a in amap.all} | {"clk"}  # the skeleton always has a clock to pace stimulus
    for t in tokens:
        if t.kind == "ident" and ALIAS_NAME.match(t.text) and t.text not in known:
            return SimResult("compile_error", f"line {t.line}: unknown alias {t.text!r}; this design has "
                             f"{', '.join(sorted(known))}")
    drivable = set(amap.drivable)
    for i, t in enumerate(tokens):
        if t.text not in drivable:
            continue
        j = i + 1
        if j < len(tokens) and tokens[j].text == "[":  # a bit or part select
            while j < len(tokens) and tokens[j].text != "]":
                j += 1
            j += 1
        rest = [x.text for x in tokens[j:j + 2]]
        if rest[:1] == ["="] and rest[1:2] != ["="] or rest == ["<", "="]:
            return None
    return SimResult("empty", "the stimulus never drives an input or the reset; nothing was simulated")


def _body_score(task, completion, cfg, opts):
    amap = alias_map(task)
    if not (completion or "").strip():
        return SimResult("empty", "empty stimulus body; nothing was simulated")
    problem = check_body(completion, amap)
    if problem:
        return problem
    return simulate(task, body_testbench(task, amap, completion, **_body_opts(opts)), cfg)


def _body_render(task, program, opts):
    return render_body(program, alias_map(task))


def vectors_data(task: Task, text: str | None, opts: dict) -> str | SimResult:
    amap = alias_map(task)
    try:
        program = parse_vectors(text or "", amap, opts.get("max_cycles", 20000))
    except VectorsError as exc:
        return SimResult("compile_error", f"malformed vectors: {exc}")
    if program.is_empty:
        return SimResult("empty", "the vectors never drive an input or the reset; nothing was simulated")
    records = expand(program, amap, opts.get("seed", 1))  # bounded: parse_vectors checked its expanded size
    return "".join(f"{c} {r} {len(a)}" + "".join(f" {i} {v:x}" for i, v in a) + "\n" for c, r, a in records)


def _vectors_score(task, completion, cfg, opts):
    return _vectors_score_many(task, [completion], cfg, opts)[0]


def _vectors_score_many(task, completions, cfg, opts):
    """All of a task's samples through one simulator process (prebuilt.run_harness_many)."""
    results = [_guarded("vectors", vectors_data, task, c, opts) for c in completions]
    runnable = [i for i, r in enumerate(results) if not isinstance(r, SimResult)]
    if runnable:
        harness = vectors_harness(task, alias_map(task), opts.get("reset_cycles", 2))
        ran = run_harness_many(task, harness, [{"stim.dat": results[i]} for i in runnable], cfg)
        for i, r in zip(runnable, ran):
            results[i] = r
    return results


def _vectors_render(task, program, opts):
    return render_vectors(program)


FORMATS: dict[str, Format] = {
    "testbench": Format("testbench", _testbench_score, _testbench_render),
    "body": Format("body", _body_score, _body_render),
    "vectors": Format("vectors", _vectors_score, _vectors_render, _vectors_score_many),
    "cocotb": Format("cocotb", cocotb_stimulus.score, cocotb_stimulus.render),
}


def get_format(name: str) -> Format:
    if name not in FORMATS:
        raise ValueError(f"unknown stimulus format {name!r}; choose one of {sorted(FORMATS)}")
    return FORMATS[name]


def score(fmt: str, task: Task, completion: str | None, cfg: SimConfig, options: dict | None = None) -> SimResult:
    """Score one completion in format `fmt` (module-level so worker processes can run it)."""
    return _guarded(fmt, get_format(fmt).score, task, completion, cfg, options or {})


def score_many(fmt: str, task: Task, completions: list[str | None], cfg: SimConfig,
               options: dict | None = None) -> list[SimResult]:
    """Score several completions for one task; each result is what `score` gives it alone. A format
    with a batched path (vectors) simulates them in one process."""
    f = get_format(fmt)
    if f.score_many is None or len(completions) < 2:
        return [score(fmt, task, c, cfg, options) for c in completions]
    return f.score_many(task, [_writable(c) for c in completions], cfg, options or {})


def _writable(completion: str | None) -> str | None:
    # lone surrogates cannot be written
    return None if completion is None else completion.encode("utf-8", "replace").decode("utf-8")


def _guarded(fmt: str, fn, task: Task, completion: str | None, *rest):
    """`fn` on one sample; a sample too deep or too large for a parser is that sample's
    compile_error, never an exception that ends the evaluation of every other sample."""
    try:
        return fn(task, _writable(completion), *rest)
    except (RecursionError, MemoryError) as exc:
        return SimResult("compile_error", f"the {fmt} sample is too deeply nested or too large to parse "
                         f"({type(exc).__name__})")


def render(fmt: str, task: Task, program: Program, options: dict | None = None) -> str:
    return get_format(fmt).render(task, program, options or {})
