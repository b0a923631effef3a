"""pass@k: the unbiased estimator of Chen et al. (2021), computed without big binomials."""
from __future__ import annotations

from collections import defaultdict


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn from n (c of them correct) passes:
    1 - C(n-c, k) / C(n, k)."""
    if not 0 <= c <= n or k < 1:
        raise ValueError(f"need 0 <= c <= n and k >= 1, got n={n}, c={c}, k={k}")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per task, got {n}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def mean_pass_at_k(rows: list[dict], k: int) -> float:
    """Mean over tasks of pass@k from per-sample rows with `task_id` and `passed`."""
    per_task: dict[str, list[bool]] = defaultdict(list)
    for r in rows:
        per_task[r["task_id"]].append(bool(r["passed"]))
    if not per_task:
        return 0.0
    return sum(pass_at_k(len(v), sum(v), k) for v in per_task.values()) / len(per_task)
