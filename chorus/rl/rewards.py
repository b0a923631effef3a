"""Reward of one simulated sample: coverage in [0, 1], penalties, a pass bonus.

Harness errors are chorus's failures, not the policy's: they get no reward (None), are left out
of group baselines and receive advantage 0.
"""
from __future__ import annotations

from ..config.schema import RewardConfig  # rl.reward's schema, its defaults and what each term does
from ..sim.result import COVERAGE_COUNTS

FAILED_TO_RUN = ("compile_error", "rejected", "timeout", "runtime_error", "missing")


def reward(status: str, overall: float | None, passed: bool, cfg: RewardConfig = RewardConfig()) -> float | None:
    if status == "harness_error":
        return None
    r = (overall or 0.0) / 100.0 if status in COVERAGE_COUNTS else 0.0
    if status == "empty":
        r += cfg.empty_penalty
    elif status in FAILED_TO_RUN and overall is None:
        r += cfg.compile_penalty
    if passed:
        r += cfg.pass_bonus
    return r


def shaped(value: float | None, length: int, max_length: int, buffer: int) -> float | None:
    """A sample's reward with the algorithm's overlong penalty added when it sets a buffer (`buffer`
    0: unshaped); None (a harness error) stays None."""
    if value is None or not buffer:
        return value
    return value + overlong_penalty(length, max_length, buffer)


def overlong_penalty(length: int, max_length: int, buffer: int) -> float:
    """DAPO's soft overlong punishment, added to a sample's reward: 0 up to max-buffer, then linear
    down to -1 at max, -1 beyond. Reward shaping, so it lives with the reward (rollouts add it when
    the algorithm sets an overlong buffer), not with the losses."""
    if buffer <= 0:
        return 0.0 if length <= max_length else -1.0
    start = max_length - buffer
    if length <= start:
        return 0.0
    if length <= max_length:
        return (start - length) / buffer
    return -1.0
