"""Reward-gated routing (CHORUS): per task, the teacher with the best execution reward is chosen,
and the student distils towards it only when it beats the student by more than a margin."""
from __future__ import annotations

from dataclasses import dataclass


# Rewards closer than this are equal, and equal is not better: the same samples averaged in another
# order differ in the last bits, and evaluation tables store coverage rounded to 1e-4 % (1e-6 of
# reward), so a smaller lead is rounding, not a better teacher.
TIE = 1e-6


@dataclass(frozen=True)
class Route:
    teacher: str | None  # None = skip this task
    reason: str  # best_teacher_beats_student | student_not_beaten | no_teacher_reward | no_student_reward
    teacher_reward: float | None = None
    student_reward: float | None = None


def route(teacher_rewards: dict[str, float | None], student_reward: float | None, margin: float = 0.0,
          order: list[str] | None = None) -> Route:
    """Pick the teacher with the highest reward if it exceeds the student's by more than `margin`
    (and more than TIE: a lead of rounding size is no lead).

    Ties between teachers go to the one earlier in `order` (default: sorted names), so the
    decision never depends on dict order. Teachers without a reward for the task are ignored."""
    order = order or sorted(teacher_rewards)
    known = [(name, teacher_rewards[name]) for name in order if teacher_rewards.get(name) is not None]
    if not known:
        return Route(None, "no_teacher_reward", None, student_reward)
    best_name, best = known[0]
    for name, r in known[1:]:
        if r > best:  # strict: an equal reward later in the order does not take over
            best_name, best = name, r
    if student_reward is None:
        return Route(None, "no_student_reward", best, None)
    if best - student_reward > margin + TIE:
        return Route(best_name, "best_teacher_beats_student", best, student_reward)
    return Route(None, "student_not_beaten", best, student_reward)
