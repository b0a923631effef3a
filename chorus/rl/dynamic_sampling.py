"""DAPO dynamic sampling: keep groups whose rewards vary, refill a bounded number of times, and
degrade to a smaller batch with a warning instead of raising."""
from __future__ import annotations

import math
import warnings
from typing import Callable


def reward_std(rewards: list[float | None]) -> float:
    valid = [r for r in rewards if r is not None]
    if len(valid) < 2:
        return 0.0
    mean = sum(valid) / len(valid)
    return math.sqrt(sum((r - mean) ** 2 for r in valid) / len(valid))


def dynamic_sample(groups: list, rewards_of: Callable[[object], list[float | None]], want: int,
                   refill: Callable[[int], list], std_threshold: float = 1e-3, max_refills: int = 2) -> tuple[list, dict]:
    """Keep groups with reward std > std_threshold (coverage is continuous: never test for exactly 0).

    `refill(k)` samples k more groups; it is called at most `max_refills` times. Returns the kept
    groups (at most `want`) and stats, warning when fewer than `want` remain."""
    kept = [g for g in groups if reward_std(rewards_of(g)) > std_threshold]
    seen, refills = len(groups), 0
    while len(kept) < want and refills < max_refills:
        more = refill(want - len(kept))
        refills += 1
        seen += len(more)
        kept += [g for g in more if reward_std(rewards_of(g)) > std_threshold]
    if len(kept) < want:
        warnings.warn(f"dynamic sampling kept {len(kept)} of {want} groups after {refills} refills; "
                      "training on a smaller batch", RuntimeWarning, stacklevel=2)
    return kept[:want], {"groups_seen": seen, "groups_kept": len(kept[:want]), "refills": refills,
                         "zero_std_fraction": 1 - len(kept) / seen if seen else 0.0}
