"""One OPD iteration outside the training step: the student samples G testbenches per task, the
simulator scores them, each task is routed to its best teacher (or skipped), and the routed
teachers score the student's exact tokens at the sampling temperature (T=1: the plain distributions)."""
from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field

import torch

from ..config.schema import TrainerConf
from ..policy.models import load_model
from ..rl.logprobs import forward_logprobs
from ..rl.advantages import ADVANTAGES
from ..rl.algos import RLAlgo
from ..rl.rewards import shaped
from ..rl.rollouts import RolloutBatch, RolloutSpec, pad_sequences, sample_groups, sample_stats
from .routing import ROUTINGS
from .teacher_samples import teacher_targets
from .teachers import Teacher, TeacherRewards, mean_rewards


@dataclass
class OPDBatch(RolloutBatch):
    teacher_logprobs: torch.Tensor | None = None  # [B, T] routed teacher's log-prob of each student token
    teacher_of: list[str | None] = field(default_factory=list)  # per sequence; None: an unrouted task's own sample
    decisions: list[dict] = field(default_factory=list)  # per task: route, reason, rewards
    kd_rows: torch.Tensor | None = None  # [B] bool: a teacher's own sample (a KD target), not the student's


class TeacherModels:
    """Teachers on demand: all kept in memory, or loaded one at a time when memory is short; either
    way on `device`, which the OPD module sets to the student's device when fit starts (`to`)."""

    def __init__(self, teachers: list[Teacher], keep_in_memory: bool = True, dtype: str = "float32",
                 device: str | torch.device = "cpu"):
        self.by_name = {t.name: t for t in teachers}
        self.keep, self.dtype, self.device = keep_in_memory, dtype, torch.device(device)
        self.loaded: dict[str, torch.nn.Module] = {}

    def to(self, device: str | torch.device) -> "TeacherModels":
        """Put the teachers (those in memory now, and every one loaded later) on `device`."""
        self.device = torch.device(device)
        for name, model in self.loaded.items():
            self.loaded[name] = model.to(self.device)
        return self

    @contextlib.contextmanager
    def use(self, name: str):
        model = self.loaded.get(name)
        if model is None:
            model, _ = load_model("hf", path=self.by_name[name].checkpoint, dtype=self.dtype, device=self.device)
            model.requires_grad_(False)
            if self.keep:
                self.loaded[name] = model
        try:
            yield model
        finally:
            if not self.keep:
                del model
                torch.cuda.empty_cache()  # room for the next teacher (nothing to do where CUDA never started)


def collect_opd(draw, engine, tokenizer, pool, spec: RolloutSpec, prompts_per_step: int, rewards: TeacherRewards,
                teachers: TeacherModels, order: list[str], margin: float = 0.0, seed: int = 0,
                micro_batch: int = 8, logit_chunk: int = 1024, routing: str = "gated", gate: str = "reward",
                pack_sequences: bool | None = TrainerConf.pack_sequences, after_generation=lambda: None,
                teacher_samples: int = 0, make_engine=None, unrouted: RLAlgo | None = None,
                routed: str = "distil", student_max: float = 1.0,
                reference: dict[str, float] | None = None) -> OPDBatch:
    """The student's samples, then `after_generation()` (a vLLM engine sleeps: the teachers that
    estimate rewards online and score the samples get its memory), then the routing (ROUTINGS[routing],
    teacher and student compared on `gate`, the teachers' values from `rewards`) and scoring. With
    `teacher_samples` > 0, each routed teacher's own better answers (`make_engine(model, tokenizer)`
    draws them) join the batch after the student's rows as KD targets (kd_rows; teacher_samples.py).
    With `unrouted` (consolidation.unrouted=rl: DAPO), a task routed to no teacher trains on the
    student's own samples under that algorithm's group advantage and overlong penalty (teacher_of None).
    `routed` (consolidation.routed) says what a routed task's own samples train under: distil (the
    teacher scores them), rl (the group advantage, as unrouted; teacher_of None) or both (the sum).
    `reference` (consolidation.gate_reference): per task, what the student reaches by RL alone; the gate
    compares the teachers with the better of it and the student's own samples."""
    tasks = draw(prompts_per_step)
    groups, timing = sample_groups(tasks, engine, tokenizer, pool, spec, seed)
    after_generation()
    teacher_r = rewards.for_tasks(tasks)
    decide, rng = ROUTINGS[routing], random.Random(seed)  # random routing: reproducible per step
    decisions, seqs, rows, teacher_of, margins = [], [], [], [], []
    n_rl = 0  # rows trained under a group advantage (unrouted=rl, routed=rl|both)

    def add(s: dict, teacher: str | None, advantage: float | None = None, scored: bool = True, **row) -> None:
        """One sequence to train: a sample (the student's or a teacher's), its route, its group
        advantage (None: none) and its rollouts.jsonl row; `scored`: the teacher scores its tokens
        (teacher_of names it; None: trained by its own advantage alone)."""
        nonlocal n_rl
        n_rl += advantage is not None
        seqs.append((s["prompt_ids"], s["gen"].token_ids, s["gen"].logprobs, advantage or 0.0))
        rows.append({**s["row"], "teacher": teacher, **row, **({"advantage": advantage} if advantage is not None
                                                                 else {})})
        teacher_of.append(teacher if scored else None)

    for grp in groups:
        task = grp[0]["task"]
        student = mean_rewards([s["row"] for s in grp], spec.rewards, gate).get(task.id)
        ref = (reference or {}).get(task.id)
        reach = student if ref is None or student is None else max(student, ref)
        r = decide(teacher_r[task.id], reach, margin, order, rng, student_max=student_max)
        decisions.append({"task_id": task.id, "teacher": r.teacher, "reason": r.reason,
                          "teacher_reward": r.teacher_reward, "student_reward": student,
                          **({"reference_reward": ref} if reference is not None else {}),
                          "teacher_rewards": teacher_r[task.id]})
        if r.teacher is not None and reach is not None:
            margins.append(r.teacher_reward - reach)
        rl = unrouted is not None and (r.teacher is None or routed != "distil")
        own = own_advantages(grp, unrouted, spec.params.max_new_tokens) if rl else [None] * len(grp)
        if r.teacher is not None and routed != "rl":  # the teacher scores them (both: plus the group advantage)
            for s, a in zip(grp, own):
                add(s, r.teacher, a)
        elif rl and any(own):  # a group without signal is dropped, as DAPO's dynamic sampling drops it
            for s, a in zip(grp, own):
                add(s, r.teacher, a, scored=False)
    n_student = len(seqs)
    routed_tasks = [(grp[0]["task"], d["teacher"], d["student_reward"]) for grp, d in zip(groups, decisions)
                    if d["teacher"]]
    kd, kd_stats = teacher_targets(routed_tasks, teachers, lambda model: make_engine(model, tokenizer), tokenizer,
                                   pool, spec, teacher_samples, gate, order, seed)
    for s, name in kd:
        add(s, name, kd_target=True)
    for key in ("generation_s", "simulation_s"):
        timing[key] += kd_stats.pop(key)
    ids, attn, comp, old, adv = pad_sequences(seqs, tokenizer.pad_token_id)
    t_logp = torch.zeros(ids.shape)
    kl: dict[str, float] = {}
    for name in order:  # one teacher at a time over the sequences routed to it
        idx = [i for i, t in enumerate(teacher_of[:n_student]) if t == name]  # KD targets need no scoring
        if not idx:
            continue
        with teachers.use(name) as model, torch.no_grad():
            device = next(model.parameters()).device
            for start in range(0, len(idx), micro_batch):
                part = torch.tensor(idx[start:start + micro_batch])
                # at the student's sampling temperature, as the student's own log-probs are
                t_logp[part] = forward_logprobs(model, ids[part].to(device), attn[part].to(device),
                                                comp[part].to(device), spec.params.temperature,
                                                logit_chunk, pack=pack_sequences).logp.float().cpu()
        m = comp[idx].bool()
        if m.any():
            kl[name] = float((old[idx] - t_logp[idx])[m].mean())
    all_rows = [s["row"] for grp in groups for s in grp]
    routed = [d for d in decisions if d["teacher"]]
    stats = {**sample_stats(all_rows), **timing, "skip_fraction": 1 - len(routed) / max(1, len(decisions)),
             "routed_fraction": len(routed) / max(1, len(decisions)),
             # the routed tasks' teacher lead on the gate's metric over what it beat (the student, or its
             # reference where that is higher; absent when none was routed)
             **({"routed_margin_mean": sum(margins) / len(margins)} if margins else {}),
             **{f"route_{n}": sum(d["teacher"] == n for d in decisions) for n in order},
             **{f"kl_{n}": v for n, v in kl.items()}, "samples_trained": len(rows),
             **(kd_stats if teacher_samples > 0 else {}),
             **({"rl_trained": n_rl} if unrouted is not None else {})}
    kd_rows = torch.arange(len(seqs)) >= n_student
    return OPDBatch(ids, attn, comp, old, adv, rows=rows, stats=stats, teacher_logprobs=t_logp,
                    teacher_of=teacher_of, decisions=decisions, kd_rows=kd_rows)


def own_advantages(group: list[dict], algo: RLAlgo, max_new_tokens: int) -> list[float]:
    """An unrouted task's samples' advantages as `algo` computes them for the own-teacher control:
    its overlong penalty added to each reward, then its group advantage."""
    return ADVANTAGES[algo.advantage]([shaped(s["reward"], len(s["gen"].token_ids), max_new_tokens,
                                              algo.overlong_buffer) for s in group])
