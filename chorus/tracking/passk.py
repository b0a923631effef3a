"""pass@k: the unbiased estimator of Chen et al. (2021), computed without big binomials."""
from __future__ import annotations

from collections import defaultdict

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn from n (c of them correct) passes:
    1 - C(n-c, k) / C(n, k)."""
    if not 0 <= c <= n or k < 1:
        raise ValueError(f"need 0 <= c <= n and k >= 1, got n={n}, c={c}, k={k}")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per task, got {n}")
    return float(pass_at_k_array(n, c, k))


def pass_at_k_array(n, c, k: int) -> np.ndarray:
    """pass_at_k elementwise over arrays of counts (the cross-fitted oracle scores every split at
    once), unchecked: NaN where n < k. C(n-c, k) / C(n, k) = prod_{i<k} (n-c-i) / (n-i), which is 0
    once n - c < k."""
    n, c = np.asarray(n, dtype=float), np.asarray(c, dtype=float)
    prod = np.ones(np.broadcast(n, c).shape)
    for i in range(k):
        with np.errstate(divide="ignore", invalid="ignore"):
            prod = prod * np.maximum(n - c - i, 0) / (n - i)
    return np.where(n >= k, 1 - prod, np.nan)


def mean_pass_at_k(rows: list[dict], k: int) -> float:
    """Mean over tasks of pass@k from per-sample rows with `task_id` and `passed`."""
    per_task: dict[str, list[bool]] = defaultdict(list)
    for r in rows:
        per_task[r["task_id"]].append(bool(r["passed"]))
    if not per_task:
        return 0.0
    return sum(pass_at_k(len(v), sum(v), k) for v in per_task.values()) / len(per_task)
