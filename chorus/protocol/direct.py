"""protocol=direct: n samples per task, one shot each.

Generation runs in this process batch by batch; each finished batch is parsed and handed to a
simulation worker pool at once, so simulation overlaps with the next batch's generation.
"""
from __future__ import annotations

import functools
import time
from contextlib import nullcontext
from typing import Sequence

from tqdm import tqdm

from ..core.task import Task
from ..policy.engines import Generation, SamplingParams
from ..policy.parsing import parse_completion
from ..policy.prompts import render_prompt
from ..scoring import result_row
from ..sim import SimConfig, SimResult
from ..sim.pool import make_pool, settled, submit_group
from ..stimulus.formats import get_format, score_many
from ..tracking.timing import add_seconds


def parsed_job(fmt: str, options: dict, task: Task, gen: Generation, cfg: SimConfig) -> SimResult:
    """Parse a generation and score it (runs in a worker). A failed parse is a status, not an error."""
    return parsed_jobs(fmt, options, task, [gen], cfg)[0]


def parsed_jobs(fmt: str, options: dict, task: Task, gens: list[Generation], cfg: SimConfig) -> list[SimResult]:
    """parsed_job for several generations of one task, scored together (formats.score_many)."""
    parsed = [parse_completion(g.text, fmt) for g in gens]
    cuts = ["the generation hit max_new_tokens; " if g.finish_reason == "length" else "" for g in gens]
    runnable = [i for i, p in enumerate(parsed) if p.code is not None]
    scored = dict(zip(runnable, score_many(fmt, task, [parsed[i].code for i in runnable], cfg, options)))
    results = []
    for i, (p, cut) in enumerate(zip(parsed, cuts)):
        r = scored.get(i) or SimResult("empty", f"no stimulus block found (parse status {p.status})")
        r.reason = f"{cut}{r.reason}"
        results.append(r)
    return results


def submit_scoring(pool, fmt: str, options: dict, task: Task, gens: list[Generation], cfg: SimConfig) -> list:
    """One future per generation: a format that scores samples together (vectors) gets them as one
    job, any other one job each (so its samples spread over the workers)."""
    job = functools.partial(parsed_job, fmt, options)
    if get_format(fmt).score_many is None:
        return [pool.submit(job, task, g, cfg) for g in gens]
    return submit_group(pool, functools.partial(parsed_jobs, fmt, options), task, gens, cfg, job)


def generation_row(task: Task, sample: int, gen: Generation, result: SimResult, cfg: SimConfig, round_: int = 0,
                   prompt_note: str = "") -> dict:
    row = result_row(task, sample, result, cfg.strict_instance)
    row.update({"round": round_, "completion_tokens": gen.meta.get("completion_tokens", len(gen.token_ids)), "finish_reason": gen.finish_reason,
                "parse_status": gen.meta.get("parse_status"), "prompt_tokens": gen.prompt_tokens,
                "prompt_note": prompt_note})
    if "api_cached" in gen.meta:  # engine=openai: was this sample paid for in this run; the server's log-probs
        row.update({"api_cached": gen.meta["api_cached"], "logprobs": gen.logprobs or None})
    return row


def run_direct(tasks: Sequence[Task], engine, tokenizer, fmt: str, n_samples: int, params: SamplingParams,
               cfg: SimConfig, fmt_options: dict | None = None, max_prompt_tokens: int = 3072,
               batch_tasks: int = 4, workers: int | None = None, overlap: bool = True, executor=None,
               progress: bool = True, on_progress=None, timing: dict | None = None, **_) -> list[dict]:
    """n samples per task, simulated as they finish generating; `on_progress(done, total)` hears
    after each generation batch how many of the samples are generated. `timing` (a job's) gains the
    seconds spent generating and then waiting on the simulations still running."""
    options = fmt_options or {}
    prompts = [render_prompt(t, fmt, tokenizer, max_prompt_tokens) for t in tasks]
    pending, generated, deferred = [], [], []
    bar = tqdm(total=len(tasks) * n_samples, desc="generate", unit="sample", disable=not progress, leave=False)
    with nullcontext(executor) if executor else make_pool(workers) as pool:
        for start in range(0, len(tasks), batch_tasks):
            chunk = range(start, min(start + batch_tasks, len(tasks)))
            t0 = time.monotonic()
            done: dict[int, tuple] = {}

            def take(k: int, samples) -> None:  # as each task's samples finish (HFEngine.streams_groups)
                i = chunk[k]
                for g in samples:
                    g.meta["parse_status"] = parse_completion(g.text, fmt).status
                bar.update(len(samples))
                done[i] = (samples, submit_scoring(pool, fmt, options, tasks[i], samples, cfg) if overlap else None)

            texts, sp = [prompts[i].text for i in chunk], SamplingParams(**{**params.__dict__, "seed": params.seed + start})
            if getattr(engine, "streams_groups", False):
                engine.generate(texts, n=n_samples, params=sp, on_group=take)
            else:
                for k, samples in enumerate(engine.generate(texts, n=n_samples, params=sp)):
                    take(k, samples)
            add_seconds(timing, "generation_s", time.monotonic() - t0)
            for i in chunk:  # rows in task order, whatever order the tasks finished in
                samples, futures = done[i]
                generated += [(i, j, g) for j, g in enumerate(samples)]
                if overlap:
                    pending += futures
                else:
                    deferred.append((i, samples))
            if on_progress:
                on_progress(len(generated), len(tasks) * n_samples)
        for i, samples in deferred:
            pending += submit_scoring(pool, fmt, options, tasks[i], samples, cfg)
        t0 = time.monotonic()
        results = [settled(f) for f in pending]
        add_seconds(timing, "simulation_wait_s", time.monotonic() - t0)
    bar.close()
    return [generation_row(tasks[i], j, g, r, cfg, 0, prompts[i].note) for (i, j, g), r in zip(generated, results)]
