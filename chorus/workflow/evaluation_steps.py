"""The pipeline's evaluation steps: chorus.evaluate command lines planned from an expert's settings (its
held-out tasks, or its training tasks for OPD's gate tables), each in a run dir named by its overrides."""
from __future__ import annotations

import hashlib
from pathlib import Path

from .steps import Step


def held_out_evaluation(expert, compose_step, runs_dir: str, name: str, policy: list[str], sampled: bool = False):
    """A chorus.evaluate step on the expert's held-out tasks, with its samples per task, format and pass
    rule (and, `sampled`, its evaluation sampling: temperature, token budgets, prompts a generate
    call), the policy given by `policy` overrides: uniform random stimulus (the row every trained
    model is read against) or a checkpoint under another protocol. Its dir is <name>-<hash of its
    overrides>, so changed held-out tasks never reuse old results."""
    return _evaluation_step(expert, compose_step, runs_dir, name, policy, "eval_tasks", None,
                            "eval_temperature" if sampled else None)


def teacher_table(expert, compose_step, runs_dir: str, name: str, samples: int):
    """A chorus.evaluate step scoring the expert on its own training tasks (rl.tasks), `samples` per task
    at the training sampling (rl.temperature, as OPD's student samples them): the per-task table OPD's
    gate reads. Never on the validation or test split."""
    return _evaluation_step(expert, compose_step, runs_dir, name,
                            ["policy=model", "model=hf", f"model.path={expert.run_dir / 'hf'}"], "tasks", samples,
                            "temperature")


def _evaluation_step(expert, compose_step, runs_dir: str, name: str, policy: list[str], tasks_key: str,
                     samples: int | None, temperature_key: str | None):
    """A chorus.evaluate step of `policy` on the expert's rl.<tasks_key> with its format and pass rule,
    `samples` per task (None: its rl.eval_samples); with `temperature_key`, sampled as the expert's
    rl.<temperature_key> with its token budgets and prompts a generate call, after the expert. Its dir
    is <name>-<hash of its overrides>."""
    c = compose_step(expert.name, expert.overrides)
    rl = c["rl"]
    tasks = {k: v for k, v in rl[tasks_key].items() if v is not None}
    overrides = [*policy, f"tasks={tasks.pop('name')}",
                 *(f"tasks.{k}={_value(v)}" for k, v in sorted(tasks.items())), f"format={c['format']['name']}",
                 f"n_samples={rl['eval_samples'] if samples is None else samples}", "progress=false",
                 *([f"policy.temperature={rl[temperature_key]}", f"policy.max_new_tokens={rl['max_new_tokens']}",
                    f"policy.max_prompt_tokens={rl['max_prompt_tokens']}",
                    f"protocol.batch_tasks={rl['prompts_per_generate']}"] if temperature_key else []),
                 *([f"pass_coverage={c['pass_coverage']}"] if c["pass_coverage"] is not None else []),
                 f"logger={c['logger']['name']}"]
    digest = hashlib.sha256("\n".join(overrides).encode()).hexdigest()[:8]
    head, _, tail = name.rpartition("/")
    return Step(name, "chorus.evaluate", overrides, Path(runs_dir) / head / f"{tail}-{digest}",
                results_in_hydra_dir=True, after=[expert.name] if temperature_key else [])


def _value(v) -> str:
    """A composed value as a Hydra override's value (lists as [a,b])."""
    return "[" + ",".join(map(str, v)) + "]" if isinstance(v, list) else str(v)
