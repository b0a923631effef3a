"""Group-relative advantages, one function per algorithm (a registry).

A group is the samples of one prompt. None rewards (harness errors) are left out of the
baseline and get advantage 0; a group whose rewards do not vary gets 0 everywhere.
"""
from __future__ import annotations

import math


class AdvantageError(ValueError):
    pass


def _stats(rewards: list[float | None]) -> tuple[list[float], float, float]:
    valid = [r for r in rewards if r is not None]
    if not valid:
        return valid, 0.0, 0.0
    mean = sum(valid) / len(valid)
    var = sum((r - mean) ** 2 for r in valid) / len(valid)
    return valid, mean, math.sqrt(var)


def group_normalized(rewards: list[float | None], eps: float = 1e-6, zero_std: float = 1e-6) -> list[float]:
    """GRPO / DAPO: (r - mean) / (std + eps) within the group."""
    if len(rewards) < 2:
        raise AdvantageError("a group of 1 sample has no std to normalise by; use n_samples >= 2 per prompt "
                             "or an algorithm without std normalisation (rl_algo=dr_grpo)")
    valid, mean, std = _stats(rewards)
    if len(valid) < 2 or std < zero_std:
        return [0.0] * len(rewards)
    return [0.0 if r is None else (r - mean) / (std + eps) for r in rewards]


def mean_centered(rewards: list[float | None], zero_std: float = 1e-6, **_) -> list[float]:
    """Dr. GRPO: r - mean, no division by the std (which biases towards easy and hard prompts)."""
    valid, mean, std = _stats(rewards)
    if not valid or std < zero_std:
        return [0.0] * len(rewards)
    return [0.0 if r is None else r - mean for r in rewards]


ADVANTAGES = {"grpo": group_normalized, "dapo": group_normalized, "dr_grpo": mean_centered}
