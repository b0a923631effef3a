"""opd.teacher_samples: the routed teachers' own answers as sequence-level KD targets.

OPD's on-policy terms score only the tokens the student drew. Where a teacher solves a task with an
answer the student never samples (another opening, another strategy), those terms cannot show it
(docs/results.md, study v2: shift/LFSR). Here each routed teacher draws K samples of its own on the
tasks routed to it, at the student's sampling settings, scored by the simulator like the student's;
those that beat the student's pass rate (a passing answer where the student's is below 1) join the
step, trained by their NLL under the student (losses.sequence_kd): GKD's mix of on-policy and teacher-generated sequences."""
from __future__ import annotations

import dataclasses

from ..rl.rollouts import RolloutSpec, sample_groups
from .routing import TIE
from .teachers import gate_value

SEED_OFFSET = 500_009  # the teachers' draws never reuse the student's sampling seeds


def teacher_targets(routed: list[tuple], teachers, make_engine, tokenizer, pool, spec: RolloutSpec, k: int,
                    order: list[str], seed: int) -> tuple[list[tuple[dict, str]], dict]:
    """`routed`: (task, teacher name, student's pass rate) per routed task. Each teacher in
    `order` draws `k` samples per task routed to it (`make_engine(model)`: an engine on the teacher's
    weights and the student's tokenizer, which check_student made the teachers share); returns the
    kept samples with their teacher, and {kd_drawn, kd_kept, kd_tasks, generation_s, simulation_s}."""
    kept: list[tuple[dict, str]] = []
    stats = {"kd_drawn": 0, "kd_kept": 0, "kd_tasks": 0, "generation_s": 0.0, "simulation_s": 0.0}
    if k <= 0 or not routed:
        return kept, stats
    teacher_spec = dataclasses.replace(spec, group_size=k)
    for j, name in enumerate(order):
        mine = [(task, student) for task, t, student in routed if t == name]
        if not mine:
            continue
        with teachers.use(name) as model:
            groups, timing = sample_groups([task for task, _ in mine], make_engine(model), tokenizer, pool,
                                           teacher_spec, seed + SEED_OFFSET * (j + 1))
        for key in ("generation_s", "simulation_s"):
            stats[key] += timing[key]
        for (task, student), grp in zip(mine, groups):
            better = [s for s in grp if _beats(gate_value(s["row"]), student)]
            stats["kd_drawn"] += len(grp)
            stats["kd_kept"] += len(better)
            stats["kd_tasks"] += bool(better)
            kept += [(s, name) for s in better]
    return kept, stats


def _beats(value: float | None, student: float | None) -> bool:
    """A teacher sample is a target when it beats the student's pass rate (a harness error has no value
    and never does)."""
    return value is not None and student is not None and value > student + TIE
