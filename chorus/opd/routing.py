"""Reward-gated routing (CHORUS) and the controls that take one part of it away.

Per task, the teacher with the best execution reward is chosen, and the student distils towards it
only when it beats the student by more than a margin (`gated`). The controls (consolidation.routing)
differ from it in one thing each: `random` keeps the gate's decision to route but sends the task to a
teacher drawn at random; `no_gate` always distils from the best teacher, even where the student is
ahead (the paper's skip rule removed). Teacher and student are compared on pass rates
(opd/teachers.py)."""
from __future__ import annotations

import random as _random
from dataclasses import dataclass


# Rewards closer than this are equal, and equal is not better: the same samples averaged in another
# order differ in the last bits, and evaluation tables store coverage rounded to 1e-4 % (1e-6 of
# reward), so a smaller lead is rounding, not a better teacher.
TIE = 1e-6


@dataclass(frozen=True)
class Route:
    teacher: str | None  # None = skip this task
    # best_teacher_beats_student | student_not_beaten | no_teacher_reward |
    # no_student_reward | random_teacher | no_gate
    reason: str
    teacher_reward: float | None = None
    student_reward: float | None = None


def _best(teacher_rewards: dict[str, float | None], order: list[str] | None) -> list[tuple[str, float]]:
    """The teachers with a reward, best first; ties keep `order` (default: sorted names)."""
    order = order or sorted(teacher_rewards)
    known = [(name, teacher_rewards[name]) for name in order if teacher_rewards.get(name) is not None]
    return sorted(known, key=lambda kv: -kv[1])  # stable: an equal reward later in the order stays later


def route(teacher_rewards: dict[str, float | None], student_reward: float | None, margin: float = 0.0,
          order: list[str] | None = None, rng: _random.Random | None = None) -> Route:
    """gated: the teacher with the highest reward if it exceeds the student's by more than `margin`
    (and more than TIE: a lead of rounding size is no lead). Ties between teachers go to the one
    earlier in `order`, so the decision never depends on dict order. Teachers without a reward for the
    task are ignored. (`rng` is unused: every routing takes the same arguments.)"""
    known = _best(teacher_rewards, order)
    if not known:
        return Route(None, "no_teacher_reward", None, student_reward)
    best_name, best = known[0]
    if student_reward is None:
        return Route(None, "no_student_reward", best, None)
    if best - student_reward > margin + TIE:
        return Route(best_name, "best_teacher_beats_student", best, student_reward)
    return Route(None, "student_not_beaten", best, student_reward)


def route_random(teacher_rewards: dict[str, float | None], student_reward: float | None, margin: float = 0.0,
                 order: list[str] | None = None, rng: _random.Random | None = None) -> Route:
    """random: where `route` routes, a teacher drawn uniformly from those with a reward (`rng`)."""
    gated = route(teacher_rewards, student_reward, margin, order)
    if gated.teacher is None:
        return gated
    name, value = (rng or _random.Random(0)).choice(_best(teacher_rewards, order))
    return Route(name, "random_teacher", value, student_reward)


def route_no_gate(teacher_rewards: dict[str, float | None], student_reward: float | None, margin: float = 0.0,
                  order: list[str] | None = None, rng: _random.Random | None = None) -> Route:
    """no_gate: the best teacher for every task that has one, whatever the student's reward."""
    known = _best(teacher_rewards, order)
    if not known:
        return Route(None, "no_teacher_reward", None, student_reward)
    return Route(known[0][0], "no_gate", known[0][1], student_reward)


ROUTINGS = {"gated": route, "random": route_random, "no_gate": route_no_gate}
# OPD's controls as a pipeline plans them and a study names them: the routings that each take one part
# of the gate away, and own_teacher (the student trained as long by DAPO, itself its only teacher)
CONTROLS = ("own_teacher",) + tuple(k for k in ROUTINGS if k != "gated")
