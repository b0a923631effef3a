"""A stage's candidate answers from a teacher model (sft_stage.candidates has teacher): `samples`
completions per task from any engine (openai for a served model, hf for a local checkpoint, vllm where
installed), each scored in the simulator while the next tasks generate; each failed one shown its
simulator feedback (as protocol=agentic gives it) and repaired once by the teacher.

Scored samples become LLM4Cov's kinds (sft/data.py turns them into examples): the passing ones are
validated answers; a failed one with its feedback pairs with the teacher's passing repair, else with the
task's best validated answer. The openai engine caches each request (policy/openai_engine.py), so a
killed build pays only for the samples it lacks when run again.
"""
from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass

from ..core.task import Task
from ..policy.engines import SamplingParams
from ..policy.parsing import parse_completion
from ..policy.prompts import fit_messages, render_messages
from ..protocol.direct import submit_scoring
from ..protocol.feedback import feedback_message
from ..sim import SimResult
from ..sim.pool import make_pool, settled
from ..tracking.timing import add_seconds


@dataclass
class Scored:
    """One teacher completion and its simulation."""
    task: Task
    sample: int
    round: int  # 0: a sample; 1: the repair of sample `sample`
    text: str
    result: SimResult
    coverage: float  # 0 for anything that did not run
    feedback: str = ""  # what the simulator's result says, as the agentic protocol shows it


def teacher_name(teacher: dict, init: str) -> str:
    return teacher.get("api_model") or teacher.get("path") or init


def open_teacher(teacher: dict, init: str, cache_root, device="cpu"):
    """(engine, tokenizer) for `teacher` (TeacherConf as a dict); its path defaults to `init`. Whether a
    served one answers is check_reachable's to say."""
    from transformers import AutoTokenizer

    from ..policy.engines import make_engine
    from ..policy.models import load_model, resolve_path

    path = resolve_path("hf", teacher.get("path") or init)
    if teacher["engine"] == "openai":
        from ..policy.openai_engine import open_openai_engine

        engine = open_openai_engine(teacher, path, cache_root)
        return engine, AutoTokenizer.from_pretrained(path)
    if teacher["engine"] == "vllm":
        tok = AutoTokenizer.from_pretrained(path)
        return make_engine("vllm", None, tok, path=path, seed=teacher["seed"]), tok
    model, tok = load_model("hf", path=path, device=device)
    return make_engine("hf", model, tok, threads=teacher["threads"], generation=teacher["generation"]), tok


def check_reachable(engine) -> None:
    """A served teacher that cannot be reached stops the build in one line before any sample is drawn
    (EndpointError is an OSError: entry points print it as their error); local engines are loaded."""
    from ..policy.openai_engine import EndpointError

    if hasattr(engine, "probe"):
        try:
            engine.probe()
        except EndpointError as exc:
            raise EndpointError(f"the teacher (sft_stage.teacher) is unreachable: {exc}") from None


def check_teacher(teacher: dict) -> None:
    """Before any stage trains (chorus.pipeline checks every stage's teacher): a served teacher answers,
    a local teacher's checkpoint exists (a null path is the stage's own starting model)."""
    from ..policy.models import resolve_path
    from ..policy.openai_engine import CompletionCache, EndpointConf, OpenAIEngine

    if teacher["engine"] == "openai":
        if not teacher.get("api_base_url"):
            raise ValueError("sft_stage.teacher.engine=openai needs sft_stage.teacher.api_base_url=<server>/v1")
        check_reachable(OpenAIEngine(EndpointConf(teacher["api_base_url"], teacher.get("api_model") or "teacher",
                                                  teacher.get("api_key_env"), timeout_s=teacher["api_timeout_s"]),
                                     CompletionCache(None)))
    if teacher.get("path"):
        resolve_path("hf", teacher["path"])


def sample_teacher(tasks: list[Task], engine, tokenizer, teacher: dict, fmt: str, sim, workers=None, executor=None,
                   bar=lambda t: t.target, batch_tasks: int = 4, on_progress=None,
                   timing: dict | None = None) -> list[Scored]:
    """teacher["samples"] scored completions per task (round 0) and, with teacher["repair"], one scored
    repair (round 1) of each sample below `bar(task)`."""
    params = SamplingParams(max_new_tokens=teacher["max_new_tokens"], temperature=teacher["temperature"],
                            top_p=teacher["top_p"], top_k=teacher["top_k"], seed=teacher["seed"])
    n, budget = teacher["samples"], teacher["max_prompt_tokens"]
    if n < 1:
        raise ValueError(f"sft_stage.teacher.samples={n} must be >= 1")
    fitted = [fit_messages(t, fmt, tokenizer, budget) for t in tasks]
    out: list[Scored] = []
    with nullcontext(executor) if executor else make_pool(workers) as pool:
        pending = []
        for start in range(0, len(tasks), batch_tasks):
            chunk = list(range(start, min(start + batch_tasks, len(tasks))))
            t0 = time.monotonic()
            gens = engine.generate([fitted[i][1].text for i in chunk], n=n,
                                   params=SamplingParams(**{**params.__dict__, "seed": params.seed + start}))
            add_seconds(timing, "generation_s", time.monotonic() - t0)
            for i, samples in zip(chunk, gens):  # scored while the next chunk generates
                pending += [(i, j, g, f) for j, (g, f) in enumerate(zip(samples, submit_scoring(
                    pool, fmt, {}, tasks[i], samples, sim)))]
            if on_progress:
                on_progress(len(pending), len(tasks) * n)
        t0 = time.monotonic()
        out = [_scored(tasks[i], j, 0, g.text, settled(f), fmt) for i, j, g, f in pending]
        add_seconds(timing, "simulation_wait_s", time.monotonic() - t0)
        if not teacher["repair"]:
            return out
        failed = [s for s in out if s.coverage < bar(s.task)]
        index = {t.id: k for k, t in enumerate(tasks)}
        prompts = [render_messages(tokenizer, fitted[index[s.task.id]][0] + [
            {"role": "assistant", "content": s.text}, {"role": "user", "content": s.feedback}]) for s in failed]
        repairs = []
        for start in range(0, len(prompts), batch_tasks * n):
            t0 = time.monotonic()
            gens = engine.generate(prompts[start:start + batch_tasks * n], n=1,
                                   params=SamplingParams(**{**params.__dict__, "seed": params.seed + 1000 + start}))
            add_seconds(timing, "generation_s", time.monotonic() - t0)
            for s, (g,) in zip(failed[start:], gens):
                repairs.append((s, g, submit_scoring(pool, fmt, {}, s.task, [g], sim)[0]))
        t0 = time.monotonic()
        out += [_scored(s.task, s.sample, 1, g.text, settled(f), fmt) for s, g, f in repairs]
        add_seconds(timing, "simulation_wait_s", time.monotonic() - t0)
    return out


def _scored(task: Task, sample: int, round_: int, text: str, result: SimResult, fmt: str) -> Scored:
    parsed = parse_completion(text, fmt)
    cov = result.overall if result.status == "ok" and result.overall is not None else 0.0
    return Scored(task, sample, round_, text, result, cov, feedback_message(parsed, result, fmt, task.target))
