"""One OPD iteration outside the training step: the student samples G testbenches per task, the
simulator scores them, each task is routed to its best teacher (or skipped), and the routed
teachers score the student's exact tokens at the sampling temperature (T=1: the plain distributions)."""
from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field
from typing import Callable

import torch

from ..config.schema import OPDConf, TrainerConf
from ..policy.models import load_model
from ..rl.logprobs import forward_logprobs
from ..rl.advantages import ADVANTAGES
from ..rl.algos import RLAlgo, get_algo
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


@dataclass
class OPDCollect:
    """One OPD iteration, as RL's Objective.collect is called: the student's samples, then
    `after_generation()` (a vLLM engine sleeps: the teachers get its memory), then four named steps:
    `route` (each task to its best teacher or none: ROUTINGS[opd.routing] on pass rates, the teachers'
    from `rewards`, the student's own or `reference`'s where higher), `own_rows` (what each task's own
    samples train under), `teacher_rows` (opd.teacher_samples: the routed teachers' own better answers
    as KD targets, after the student's rows) and `score` (each routed teacher's log-probs of the
    student's exact tokens, at the sampling temperature)."""
    opd: OPDConf
    rewards: TeacherRewards
    teachers: TeacherModels
    order: list[str]  # the pool's teacher names: ties between teachers go to the earlier one
    reference: dict[str, float]  # opd.gate_reference's pass rates per training task ({}: none)
    make_engine: Callable  # (teacher model, tokenizer) -> the engine a teacher draws its own samples with
    micro_batch: int = 8
    logit_chunk: int = 1024
    pack_sequences: bool | None = TrainerConf.pack_sequences
    # what unrouted=rl (and routed=both) train a task's own samples under: DAPO, as the own-teacher control
    dapo: RLAlgo | None = field(init=False)

    def __post_init__(self):
        self.dapo = get_algo("dapo") if self.opd.unrouted == "rl" else None

    def __call__(self, draw, engine, tokenizer, pool, spec: RolloutSpec, prompts_per_step: int, seed: int = 0,
                 after_generation=lambda: None) -> OPDBatch:
        groups, timing = sample_groups(draw(prompts_per_step), engine, tokenizer, pool, spec, seed)
        after_generation()
        decisions, margins = self.route(groups, random.Random(seed))  # random routing: reproducible per step
        rows = TrainingRows()
        for grp, d in zip(groups, decisions):
            self.own_rows(rows, grp, d["teacher"], spec.params.max_new_tokens)
        n_student = len(rows.seqs)
        kd_stats = self.teacher_rows(rows, groups, decisions, tokenizer, pool, spec, seed)
        for key in ("generation_s", "simulation_s"):
            timing[key] += kd_stats.pop(key)
        ids, attn, comp, old, adv = pad_sequences(rows.seqs, tokenizer.pad_token_id)
        t_logp, kl = self.score(ids, attn, comp, old, rows.teacher_of[:n_student], spec.params.temperature)
        routed = [d for d in decisions if d["teacher"]]
        stats = {**sample_stats([s["row"] for grp in groups for s in grp]), **timing,
                 "skip_fraction": 1 - len(routed) / max(1, len(decisions)),
                 "routed_fraction": len(routed) / max(1, len(decisions)),
                 # the routed tasks' teacher lead over what it beat (the student, or its reference where
                 # that is higher; absent when none was routed)
                 **({"routed_margin_mean": sum(margins) / len(margins)} if margins else {}),
                 **{f"route_{n}": sum(d["teacher"] == n for d in decisions) for n in self.order},
                 **{f"kl_{n}": v for n, v in kl.items()}, "samples_trained": len(rows.rows),
                 **(kd_stats if self.opd.teacher_samples > 0 else {}),
                 **({"rl_trained": rows.n_rl} if self.opd.unrouted == "rl" else {})}
        return OPDBatch(ids, attn, comp, old, adv, rows=rows.rows, stats=stats, teacher_logprobs=t_logp,
                        teacher_of=rows.teacher_of, decisions=decisions,
                        kd_rows=torch.arange(len(rows.seqs)) >= n_student)

    def route(self, groups, rng: random.Random) -> tuple[list[dict], list[float]]:
        """Per task, its decision (teacher or None, why, the pass rates compared) and, for the routed
        ones, the teacher's lead."""
        decide, teacher_r = ROUTINGS[str(self.opd.routing)], self.rewards.for_tasks([g[0]["task"] for g in groups])
        decisions, margins = [], []
        for grp in groups:
            task = grp[0]["task"]
            student = mean_rewards([s["row"] for s in grp]).get(task.id)
            ref = self.reference.get(task.id)
            reach = student if ref is None or student is None else max(student, ref)
            r = decide(teacher_r[task.id], reach, self.opd.margin, self.order, rng)
            decisions.append({"task_id": task.id, "teacher": r.teacher, "reason": r.reason,
                              "teacher_reward": r.teacher_reward, "student_reward": student,
                              **({"reference_reward": ref} if self.reference else {}),
                              "teacher_rewards": teacher_r[task.id]})
            if r.teacher is not None and reach is not None:
                margins.append(r.teacher_reward - reach)
        return decisions, margins

    def own_rows(self, rows: "TrainingRows", grp: list[dict], teacher: str | None, max_new_tokens: int) -> None:
        """A task's own samples: a routed task's are scored by its teacher (routed=both: plus DAPO's
        group advantage); an unrouted task's train under DAPO (unrouted=rl) or not at all (skip). A group
        without signal is dropped, as DAPO's dynamic sampling drops it."""
        rl = self.opd.unrouted == "rl" and (teacher is None or self.opd.routed == "both")
        own = own_advantages(grp, self.dapo, max_new_tokens) if rl else [None] * len(grp)
        if teacher is not None:
            for s, a in zip(grp, own):
                rows.add(s, teacher, a)
        elif rl and any(own):
            for s, a in zip(grp, own):
                rows.add(s, None, a)

    def teacher_rows(self, rows: "TrainingRows", groups, decisions, tokenizer, pool, spec: RolloutSpec,
                     seed: int) -> dict:
        """opd.teacher_samples of each routed teacher's own, those beating the student, added as KD rows;
        returns teacher_samples.teacher_targets' stats."""
        routed = [(grp[0]["task"], d["teacher"], d["student_reward"]) for grp, d in zip(groups, decisions)
                  if d["teacher"]]
        kd, stats = teacher_targets(routed, self.teachers, lambda model: self.make_engine(model, tokenizer),
                                    tokenizer, pool, spec, self.opd.teacher_samples, self.order, seed)
        for s, name in kd:
            rows.add(s, name, kd_target=True)
        return stats

    def score(self, ids, attn, comp, old, teacher_of: list[str | None], temperature: float):
        """[B, T] log-probs of each student row's tokens under its teacher (zeros elsewhere: KD rows and
        rows without one), one teacher at a time, and each teacher's mean log-ratio (kl_<name>)."""
        t_logp = torch.zeros(ids.shape)
        kl: dict[str, float] = {}
        for name in self.order:
            idx = [i for i, t in enumerate(teacher_of) if t == name]
            if not idx:
                continue
            with self.teachers.use(name) as model, torch.no_grad():
                device = next(model.parameters()).device
                for start in range(0, len(idx), self.micro_batch):
                    part = torch.tensor(idx[start:start + self.micro_batch])
                    # at the student's sampling temperature, as the student's own log-probs are
                    t_logp[part] = forward_logprobs(model, ids[part].to(device), attn[part].to(device),
                                                    comp[part].to(device), temperature, self.logit_chunk,
                                                    pack=self.pack_sequences).logp.float().cpu()
            m = comp[idx].bool()
            if m.any():
                kl[name] = float((old[idx] - t_logp[idx])[m].mean())
        return t_logp, kl


@dataclass
class TrainingRows:
    """The step's sequences as they are added: tokens, old log-probs and group advantage; the
    rollouts.jsonl row; the teacher that scores it (None: its own advantage alone)."""
    seqs: list = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)
    teacher_of: list[str | None] = field(default_factory=list)
    n_rl: int = 0  # rows trained under a group advantage (unrouted=rl, routed=both)

    def add(self, s: dict, teacher: str | None, advantage: float | None = None, **row) -> None:
        self.n_rl += advantage is not None
        self.seqs.append((s["prompt_ids"], s["gen"].token_ids, s["gen"].logprobs, advantage or 0.0))
        self.rows.append({**s["row"], "teacher": teacher, **row,
                          **({"advantage": advantage} if advantage is not None else {})})
        self.teacher_of.append(teacher)


def own_advantages(group: list[dict], algo: RLAlgo, max_new_tokens: int) -> list[float]:
    """An unrouted task's samples' advantages as `algo` computes them for the own-teacher control:
    its overlong penalty added to each reward, then its group advantage."""
    return ADVANTAGES[algo.advantage]([shaped(s["reward"], len(s["gen"].token_ids), max_new_tokens,
                                              algo.overlong_buffer) for s in group])
