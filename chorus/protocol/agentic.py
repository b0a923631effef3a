"""protocol=agentic: the model sees its parse error, compile log or coverage holes and revises
its stimulus for up to `rounds` more rounds, as in LLM4Cov. A sample keeps its best result over
rounds (a passing one before any that does not pass, then the most coverage), and stops at 100 %
coverage (`stop_at=full`) or as soon as its kept result passes (`stop_at=pass`: the rounds a
pass-only metric needs; Pass@1 is the same rule, coverage means are lower). `markov=True` keeps only
the system and user messages, the best answer so far and its feedback, instead of the whole
conversation.

Round 0 is protocol=direct's sampling: the same prompt (cut to max_prompt_tokens the same way), each
task's samples one group (its prompt's prefix kept once), `batch_tasks` tasks a generate call. Later
rounds give every still-active sample its own conversation, `batch_tasks x n_samples` of them a call
(one call for all of them held every conversation's cache at once). Each round is scored in parallel.
Rows: one per sample and round; the kept (best) row of each sample has `final: True`. `timing` (a
job's) gains the seconds spent generating and waiting on simulations once a round's generation is done;
`reporter` (tracking.progress.Progress) hears each round's samples generated so far.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from contextlib import nullcontext
from typing import Sequence

from ..core.modes import AgenticStop
from ..core.task import Task
from ..policy.engines import Generation, SamplingParams
from ..policy.parsing import parse_completion
from ..policy.prompts import fit_messages, render_messages
from ..sim import SimConfig, SimResult
from ..sim.pool import make_pool, settled
from ..sim.result import COVERAGE_COUNTS
from ..tracking.summary import passes
from ..tracking.timing import add_seconds
from .direct import generation_row, parsed_job
from .feedback import feedback_message


STOPS = tuple(m.value for m in AgenticStop)  # the schema refuses others at composition


@dataclass
class _Sample:
    task_index: int
    sample: int
    history: list[dict]
    best: tuple[bool, float, int] = (False, -1.0, -1)  # (passes, overall, round) of the kept result
    best_turn: list[dict] = field(default_factory=list)  # [assistant, feedback] of the best answer
    done: bool = False


def _conversation(s: _Sample, markov: bool, base: list[dict]) -> list[dict]:
    return base + s.best_turn if markov else s.history


def standing(row: dict, pass_coverage: float | None = None) -> tuple[bool, float]:
    """How a round's result ranks: passing first, then coverage that counts as reward
    (sim/result.COVERAGE_COUNTS). A run that stopped on an error keeps its coverage but does not
    pass, so it must not displace an earlier round that passed with less."""
    counts = row["status"] in COVERAGE_COUNTS and row["overall"] is not None
    return passes(row, pass_coverage), row["overall"] if counts else 0.0


def run_agentic(tasks: Sequence[Task], engine, tokenizer, fmt: str, n_samples: int, params: SamplingParams,
                cfg: SimConfig, fmt_options: dict | None = None, max_prompt_tokens: int = 3072,
                rounds: int = 3, markov: bool = False, batch_tasks: int = 4, workers: int | None = None,
                progress: bool = True, executor=None, timing: dict | None = None, reporter=None,
                stop_at: str = "full", pass_coverage: float | None = None, **_) -> list[dict]:
    if stop_at not in STOPS:
        raise ValueError(f"protocol.stop_at={stop_at!r}: use one of {', '.join(STOPS)}")
    job = functools.partial(parsed_job, fmt, fmt_options or {})
    fitted = [fit_messages(t, fmt, tokenizer, max_prompt_tokens) for t in tasks]
    bases = [msgs for msgs, _ in fitted]
    samples = [_Sample(i, k, list(bases[i])) for i in range(len(tasks)) for k in range(n_samples)]
    rows: list[dict] = []

    def seeded(seed: int) -> SamplingParams:
        return SamplingParams(**{**params.__dict__, "seed": seed})

    with nullcontext(executor) if executor else make_pool(workers) as pool:
        for rnd in range(rounds + 1):
            active = [s for s in samples if not s.done]
            if not active:
                break
            gens, t0 = [], time.monotonic()
            report = reporter.callback(f"round {rnd}") if reporter else (lambda done, total: None)
            report(0, len(active))
            if rnd == 0:  # as protocol=direct samples: a task's samples share its prompt
                for start in range(0, len(tasks), batch_tasks):
                    texts = [prompt.text for _, prompt in fitted[start:start + batch_tasks]]
                    gens += [[g] for group in engine.generate(texts, n=n_samples, params=seeded(params.seed + start))
                             for g in group]
                    report(len(gens), len(active))
            else:
                prompts = []
                for s in active:
                    text = render_messages(tokenizer, _conversation(s, markov, bases[s.task_index]))
                    if len(tokenizer(text, add_special_tokens=False)["input_ids"]) > max_prompt_tokens:
                        # The whole conversation no longer fits: fall back to the markov form.
                        text = render_messages(tokenizer, _conversation(s, True, bases[s.task_index]))
                    prompts.append(text)
                rows_per_call = batch_tasks * n_samples
                for start in range(0, len(prompts), rows_per_call):
                    gens += engine.generate(prompts[start:start + rows_per_call], n=1,
                                            params=seeded(params.seed + 1000 * rnd + start))
                    report(len(gens), len(active))
            add_seconds(timing, "generation_s", time.monotonic() - t0)  # with round 1+'s prompt rendering
            futures = [pool.submit(job, tasks[s.task_index], g[0], cfg) for s, g in zip(active, gens)]
            t0 = time.monotonic()
            results: list[SimResult] = [settled(f) for f in futures]
            add_seconds(timing, "simulation_wait_s", time.monotonic() - t0)
            for s, g, result in zip(active, gens, results):
                gen: Generation = g[0]
                task = tasks[s.task_index]
                parsed = parse_completion(gen.text, fmt)
                gen.meta["parse_status"] = parsed.status
                row = generation_row(task, s.sample, gen, result, cfg, rnd)
                row["final"] = False
                rows.append(row)
                note = feedback_message(parsed, result, fmt, task.target)
                turn = [{"role": "assistant", "content": gen.text}, {"role": "user", "content": note}]
                s.history += turn
                ranked = standing(row, pass_coverage)
                if ranked > s.best[:2]:
                    s.best, s.best_turn = (*ranked, rnd), turn
                s.done = ranked[1] >= 100.0 - 1e-9 or (stop_at == "pass" and s.best[0])
    by_key = {(row["task_id"], row["sample"], row["round"]): row for row in rows}
    for s in samples:
        if (row := by_key.get((tasks[s.task_index].id, s.sample, s.best[2]))) is not None:
            row["final"] = True
    return rows
