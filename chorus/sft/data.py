"""SFT data mirroring LLM4Cov's three ingredients:

1. execution-validated examples: candidate stimulus is kept only if it runs and reaches a
   coverage threshold in the simulator;
2. agentic repair examples: a failed or partial answer with its real feedback, paired with a
   verified better answer;
3. worst-state-prioritised sampling: tasks the current model covers least get more weight.

Examples are chat messages plus the completion text, ready for any tokenizer's chat template.
"""
from __future__ import annotations

import functools
import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

from ..core.task import Task
from ..policy.parsing import parse_completion
from ..policy.prompts import FENCE, FILENAME, messages
from ..policy.static import QUALITIES
from ..protocol.feedback import feedback_message
from ..sim import SimConfig
from ..sim.pool import evaluate_many
from ..stimulus.aliases import alias_map
from ..stimulus.formats import render, score
from ..stimulus.program import parse_vectors


@dataclass
class Example:
    task_id: str
    kind: str  # validated | repair
    messages: list[dict]
    completion: str
    coverage: float
    meta: dict = field(default_factory=dict)


def answer(task: Task, fmt: str, code: str) -> str:
    """A completion in the shape the prompts ask for: filename line and one fenced block."""
    return f"filename: {FILENAME[fmt].format(tb=task.tb_name)}\n```{FENCE[fmt]}\n{code.rstrip()}\n```\n"


def skill_of(label: str) -> str | None:
    """The skill of a candidate labelled `strategy:<name>` (tasks.generated.SKILLS); None for grades."""
    from ..tasks.generated import SKILLS

    return SKILLS.get(label.split(":", 1)[1]) if label.startswith("strategy:") else None


def in_skills(label: str, skills) -> bool:
    """Whether a candidate (grade or `strategy:<name>`) is taught under `skills` (None: every skill);
    grade programs are not strategies and always are."""
    return skills is None or skill_of(label) in (None, *skills)


def check_skills(skills) -> None:
    from ..tasks.generated import SKILLS

    unknown = sorted(set(skills or ()) - set(SKILLS.values()))
    if unknown:
        raise ValueError(f"unknown skill(s) {unknown} in sft_stage.skills / repair_skills; choose from "
                         f"{sorted(set(SKILLS.values()))}")


def candidates(task: Task, fmt: str, grades: tuple[str, ...] = QUALITIES,
               strategies: bool = False, skills=None, random: bool = False) -> list[tuple[str, str]]:
    """(grade, code) for the task's own stimulus, and (`strategy:<name>`, code) for each of its
    stimulus strategies when asked (only those of `skills` when given); bundled tasks offer their
    reference testbench. random: also (`random:<i>`, code) for uniform random bursts of the cycles
    its measured target was set with (tasks/measured_targets.random_bursts)."""
    from ..tasks.measured_targets import random_bursts

    programs = task.meta.get("programs") or {}
    chosen = [(g, programs[g]) for g in grades if g in programs]
    if strategies:
        chosen += [(f"strategy:{name}", text) for name, text in (task.meta.get("strategies") or {}).items()]
        chosen = [(g, c) for g, c in chosen if in_skills(g, skills)]
    amap = alias_map(task) if chosen or random else None
    out = [(g, render(fmt, task, parse_vectors(text, amap))) for g, text in chosen]
    if not out and grades and fmt == "testbench" and task.reference_tb:
        out.append(("reference", task.reference_tb))
    if random:
        out += [(f"random:{i}", render(fmt, task, parse_vectors(text, amap)))
                for i, text in enumerate(random_bursts(task, amap))]
    return out


def build_examples(tasks: list[Task], fmt: str, cfg: SimConfig, min_coverage: float | None = 80.0,
                   repair: bool = True, workers: int | None = None, grades: tuple[str, ...] = QUALITIES,
                   prompt: Callable[[Task], list[dict]] | None = None,
                   on_progress: Callable[[int, int], None] | None = None, executor=None,
                   strategies: bool = False, skills=None, random: bool = False) -> list[Example]:
    """Simulate every candidate; keep validated answers (coverage >= min_coverage, or the task's own
    target when it is None) and pair weaker ones with better ones. strategies: the tasks' stimulus
    strategies are candidates beside the grades (skills: only the strategies of those skills); random:
    uniform random bursts are too (candidates(); grades=() for those alone).

    `prompt(task)` gives the task's chat messages (default: the full prompt; stages pass the
    shortened prompt that fits their prompt budget). `on_progress(done, total)` hears how many
    candidates are simulated, at the start and as each one finishes."""
    prompt = prompt or (lambda t: messages(t, fmt))
    jobs, where = [], []
    for t in tasks:
        for grade, code in candidates(t, fmt, grades, strategies, skills, random):
            jobs.append((t, code))
            where.append((t, grade, code))
    finished, every = [], max(1, len(jobs) // 20)  # about 20 reports a pass: the log stays readable

    def simulated(index: int, result) -> None:
        finished.append(index)
        if len(finished) % every == 0 or len(finished) == len(jobs):
            on_progress(len(finished), len(jobs))

    if on_progress:
        on_progress(0, len(jobs))
    results = evaluate_many(jobs, cfg, workers, on_result=simulated if on_progress else None,
                            fn=functools.partial(score, fmt, options={}), executor=executor)
    by_task: dict[str, list] = defaultdict(list)
    for (t, grade, code), r in zip(where, results):
        by_task[t.id].append((t, grade, code, r))
    examples = []
    for entries in by_task.values():
        bar = entries[0][0].target if min_coverage is None else min_coverage
        ok = [e for e in entries if e[3].status == "ok" and (e[3].overall or 0) >= bar]
        if not ok:
            continue
        best = max(ok, key=lambda e: e[3].overall)
        t = best[0]
        for _, grade, code, r in ok:
            examples.append(Example(t.id, "validated", prompt(t), answer(t, fmt, code), r.overall,
                                    {"grade": grade, "source": source_of(grade), "status": r.status}))
        if not repair:
            continue
        for _, grade, code, r in entries:
            cov = r.overall if r.status == "ok" and r.overall is not None else 0.0
            if cov + 1e-9 >= best[3].overall:
                continue
            first = answer(t, fmt, code)
            note = feedback_message(parse_completion(first, fmt), r, fmt, t.target)
            convo = prompt(t) + [{"role": "assistant", "content": first}, {"role": "user", "content": note}]
            examples.append(Example(t.id, "repair", convo, answer(t, fmt, best[2]), best[3].overall,
                                    {"from_grade": grade, "from_coverage": cov, "from_status": r.status,
                                     "source": source_of(best[1]), "status": best[3].status}))
    return examples


def best_validated(examples: list[Example]) -> dict[str, Example]:
    """Each task's validated example with the most coverage (the first of equals): a repair's answer."""
    best: dict[str, Example] = {}
    for e in examples:
        if e.kind == "validated" and (e.task_id not in best or e.coverage > best[e.task_id].coverage):
            best[e.task_id] = e
    return best


def source_of(label: str) -> str:
    """A candidate's source (sft_stage.candidates) from its label: random:<i> is random, the rest reference."""
    return "random" if label.startswith("random:") else "reference"


def teacher_examples(scored: list, fmt: str, prompt: Callable[[Task], list[dict]], bar: Callable[[Task], float],
                     earlier: list[Example], provenance: dict, repair: bool = True) -> list[Example]:
    """Examples from a teacher's scored completions (sft/teacher.py's Scored, rounds 0 and 1): each
    sample reaching `bar(task)` a validated answer; each one below it (with its simulator feedback) a
    repair pair whose answer is the teacher's repair of it when that reaches the bar, else the task's
    best validated answer among `earlier` examples and the teacher's own.
    `provenance` (engine, model, sampling settings) goes into every example's meta."""
    samples = [s for s in scored if s.round == 0]
    repairs = {(s.task.id, s.sample): s for s in scored if s.round == 1}
    out = []
    for s in samples:
        code = parse_completion(s.text, fmt).code
        if code is not None and s.result.status == "ok" and s.coverage >= bar(s.task):
            out.append(Example(s.task.id, "validated", prompt(s.task), answer(s.task, fmt, code), s.coverage,
                               {"source": "teacher", "grade": f"teacher:{s.sample}", "sample": s.sample,
                                "round": 0, "status": s.result.status, **provenance}))
    if not repair:
        return out
    best = best_validated([*earlier, *out])
    for s in samples:
        if s.coverage >= bar(s.task):
            continue
        fix = repairs.get((s.task.id, s.sample))
        fix_code = parse_completion(fix.text, fmt).code if fix is not None else None
        convo = prompt(s.task) + [{"role": "assistant", "content": s.text}, {"role": "user", "content": s.feedback}]
        meta = {"sample": s.sample, "from_coverage": s.coverage, "from_status": s.result.status, **provenance}
        if fix_code is not None and fix.result.status == "ok" and fix.coverage >= bar(s.task):
            out.append(Example(s.task.id, "repair", convo, answer(s.task, fmt, fix_code), fix.coverage,
                               {**meta, "source": "teacher_repair", "round": 1, "status": fix.result.status}))
        elif s.task.id in best:
            good = best[s.task.id]
            out.append(Example(s.task.id, "repair", convo, good.completion, good.coverage,
                               {**meta, "source": f"best_validated ({good.meta.get('source', 'reference')})",
                                "round": 0, "status": good.meta.get("status", "ok")}))
    return out


def score_samples(samples: list[tuple[Task, str]], fmt: str, cfg: SimConfig, workers: int | None = None,
                  executor=None) -> list[tuple]:
    """Each sampled completion (task, text) parsed and simulated once: (task, text, parsed, result or
    None when it did not parse, coverage with 0 for anything that did not run)."""
    parsed = [(t, text, parse_completion(text, fmt)) for t, text in samples]
    results = iter(evaluate_many([(t, p.code) for t, _, p in parsed if p.code is not None], cfg, workers,
                                 fn=functools.partial(score, fmt, options={}), executor=executor))
    out = []
    for t, text, p in parsed:
        r = next(results) if p.code is not None else None
        out.append((t, text, p, r, r.overall if r is not None and r.status == "ok" and r.overall is not None else 0.0))
    return out


def own_repairs(samples: list[tuple[Task, str]], examples: list[Example], fmt: str, cfg: SimConfig,
                min_coverage: float | None = 80.0, workers: int | None = None,
                prompt: Callable[[Task], list[dict]] | None = None, executor=None,
                scored: list[tuple] | None = None) -> list[Example]:
    """Repair pairs from a model's own answers (LLM4Cov's stage-1 data): each sampled completion
    (task, text) that fails (unparsable, not simulated, or below min_coverage, or the task's target
    when None) with the real feedback of its own simulation, followed by the task's best validated
    answer among `examples`. Tasks without a validated answer give none. `scored`: the samples'
    score_samples() already (then `samples` is not read)."""
    prompt = prompt or (lambda t: messages(t, fmt))
    best = best_validated(examples)
    if scored is None:
        scored = score_samples([(t, text) for t, text in samples if t.id in best], fmt, cfg, workers, executor)
    out = []
    for t, text, parsed, r, cov in scored:
        if t.id not in best or cov >= (t.target if min_coverage is None else min_coverage):
            continue  # nothing to teach, or it passed: nothing to repair
        note = feedback_message(parsed, r, fmt, t.target)
        convo = prompt(t) + [{"role": "assistant", "content": text}, {"role": "user", "content": note}]
        good = best[t.id]
        out.append(Example(t.id, "repair", convo, good.completion, good.coverage,
                           {"from": "own", "from_coverage": cov, "from_status": r.status if r else parsed.status}))
    return out


def task_weights(coverage_by_task: dict[str, float], floor: float = 0.05) -> dict[str, float]:
    """Worst-state priority: weight 1 - coverage/100 (at least `floor`), normalised to sum 1."""
    raw = {t: max(floor, 1.0 - c / 100.0) for t, c in coverage_by_task.items()}
    total = sum(raw.values())
    return {t: w / total for t, w in raw.items()} if total else {}


def prioritised_sample(examples: list[Example], weights: dict[str, float], k: int, seed: int = 0) -> list[Example]:
    """Draw k examples: a task by its weight, then one of its examples uniformly (with replacement)."""
    by_task: dict[str, list[Example]] = defaultdict(list)
    for e in examples:
        by_task[e.task_id].append(e)
    tasks = [t for t in by_task if weights.get(t, 0) > 0]
    if not tasks:
        return []
    rng = random.Random(seed)
    chosen = rng.choices(tasks, weights=[weights[t] for t in tasks], k=k)
    return [rng.choice(by_task[t]) for t in chosen]
