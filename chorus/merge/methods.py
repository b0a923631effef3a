"""Model merging as pure tensor functions, one per method (a registry), as the papers define them.

Every function merges one tensor (or a block of rows of one) of several experts:
`experts` are the experts' tensors, `base` the shared init's (None for soup), `weights` one per
expert. Methods over task vectors (tau_i = expert_i - base) return base + lam * merged(tau).
Randomised methods take a torch.Generator so a merge is reproducible.

One departure from the papers, `normalize` (default true): task arithmetic and DARE average the
task vectors instead of adding them up, and DELLA's mean divides by the experts agreeing before its
drop. Experts from nested SFT stages share those stages' changes, which a sum counts once per expert
(see `combine`; normalize=false gives the papers' definitions).
"""
from __future__ import annotations

import torch


def soup(experts, base=None, weights=None, **_):
    """Model soup (Wortsman et al. 2022): the (weighted) average of the weights."""
    w = merge_weights(weights, len(experts))
    return sum(wi * e.float() for wi, e in zip(w, experts)) / sum(w)


def task_arithmetic(experts, base, weights=None, lam: float = 1.0, normalize: bool = True, **_):
    """Task arithmetic (Ilharco et al. 2023): base + lam * sum_i w_i tau_i, divided by sum_i w_i when
    `normalize` (see `combine`; at lam 1 that is soup)."""
    w = merge_weights(weights, len(experts))
    b = base.float()
    return b + lam * combine([wi * (e.float() - b) for wi, e in zip(w, experts)], w, normalize)


def ties(experts, base, weights=None, density: float = 0.2, lam: float = 1.0, thresholds=None, **_):
    """TIES (Yadav et al. 2023): trim each tau to its top-`density` magnitudes, elect the sign with
    the larger total mass per entry, average only the entries that agree with it (disjoint mean).

    `thresholds[i]` is expert i's magnitude cut for the whole tensor (see `trim_threshold`), so rows
    of a large tensor can be merged in blocks with the same result."""
    b = base.float()
    w = merge_weights(weights, len(experts))
    taus = []
    for i, e in enumerate(experts):
        tau = e.float() - b
        cut = thresholds[i] if thresholds is not None else trim_threshold(tau, density)
        taus.append(torch.where(tau.abs() >= cut, tau, torch.zeros_like(tau)) * w[i])
    return b + lam * _disjoint_mean(taus, w)


def dare(experts, base, weights=None, density: float = 0.2, lam: float = 1.0, normalize: bool = True,
         generator=None, **_):
    """DARE (Yu et al. 2024): drop each tau entry with p = 1 - density, rescale survivors by
    1/(1 - p), then combine the weighted task vectors as task arithmetic does (`normalize`)."""
    check_density(density)
    b = base.float()
    w = merge_weights(weights, len(experts))
    kept = []
    for wi, e in zip(w, experts):
        tau = e.float() - b
        keep = torch.rand(tau.shape, generator=generator) < density
        kept.append(wi * torch.where(keep, tau / density, torch.zeros_like(tau)))
    return b + lam * combine(kept, w, normalize)


def della(experts, base, weights=None, density: float = 0.2, epsilon: float = 0.1, lam: float = 1.0,
          normalize: bool = True, generator=None, **_):
    """DELLA (Deep et al. 2024): MagPrune, elect, fuse.

    MagPrune ranks each row's tau entries by magnitude and gives them drop probabilities spread
    evenly over [p - eps/2, p + eps/2] around p = 1 - density (largest magnitude: smallest drop);
    survivors are rescaled by 1/(1 - p_i). Then TIES's sign election and disjoint mean.

    The rescale makes the survivors' sum an unbiased estimate of the agreeing experts' sum, so with
    `normalize` the mean divides it by the weight of the experts that agree before the drop; dividing
    by the survivors' weight only (normalize=false) scales the merge up by about 1/density
    (bench/merge_nesting.py: stage1's SFT change x1.36 at density 0.5, x1.71 at 0.2)."""
    check_density(density)
    b = base.float()
    w = merge_weights(weights, len(experts))
    taus, whole = [], []
    for wi, e in zip(w, experts):
        tau = e.float() - b
        p = drop_probabilities(tau, density, epsilon)
        keep = torch.rand(tau.shape, generator=generator) >= p
        taus.append(torch.where(keep, tau / (1 - p), torch.zeros_like(tau)) * wi)
        whole.append(tau * wi)
    return b + lam * _disjoint_mean(taus, w, mass_of=whole if normalize else None)


def drop_probabilities(tau: torch.Tensor, density: float, epsilon: float) -> torch.Tensor:
    """DELLA's per-entry drop probability, ranked by magnitude within each row (last dim)."""
    rows = tau.reshape(-1, tau.shape[-1]) if tau.dim() else tau.reshape(1, 1)
    n = rows.shape[-1]
    order = rows.abs().argsort(dim=-1, descending=True)
    rank = torch.empty_like(rows, dtype=torch.float32)  # 0 = largest; one sort plus a scatter, not two sorts
    rank.scatter_(-1, order, torch.arange(n, dtype=torch.float32).expand_as(rank).contiguous())
    step = rank / (n - 1) if n > 1 else torch.zeros_like(rank)
    p = (1 - density) - epsilon / 2 + epsilon * step
    return p.clamp(0.0, 1.0 - 1e-6).reshape(tau.shape)


def trim_threshold(tau: torch.Tensor, density: float) -> float:
    """The magnitude of tau's k-th largest entry, k = ceil(density * n): TIES keeps entries >= it."""
    check_density(density)
    flat = tau.float().abs().flatten()
    k = max(1, int(-(-density * flat.numel() // 1)))
    if k >= flat.numel():
        return 0.0
    return float(flat.kthvalue(flat.numel() - k + 1).values)


def combine(weighted_taus, w, normalize: bool) -> torch.Tensor:
    """The sum of the weighted task vectors, divided by the sum of the weights when `normalize`.

    Experts fine-tuned from nested checkpoints share changes: with stage_k = stage_{k-1} + D_k and
    task vectors against stage0, tau_2 = D1 + D2 + R2 and tau_1 = D1 + R1, so a plain sum adds D1
    once per expert that inherited it (bench/merge_nesting.py measured D1 x 2.0 for three experts).
    With non-negative weights the weighted mean keeps every coefficient within [0, 1] (as
    mergekit's `normalize: true` for its linear merges)."""
    total = sum(weighted_taus)
    if not normalize:
        return total
    check_weight_sum(w)
    return total / sum(w)


def check_weight_sum(w: list[float]) -> None:
    if sum(w) == 0:
        raise ValueError(f"merge weights {w} sum to 0 and a normalized merge divides by their sum; "
                         "give weights with a non-zero sum or set consolidation.normalize=false")


def _disjoint_mean(taus, w, mass_of=None):
    """Per entry: elect the sign of the summed taus, add the entries that agree with it and divide by
    the weight of the experts whose `mass_of` entries (default: the taus) agree with it."""
    stacked = torch.stack(taus)
    sign = torch.sign(stacked.sum(0))
    agree = (torch.sign(stacked) == sign) & (stacked != 0)
    ref = torch.stack(mass_of) if mass_of is not None else stacked
    counted = (torch.sign(ref) == sign) & (ref != 0)
    weight = torch.tensor(w, dtype=stacked.dtype).view(-1, *[1] * (stacked.dim() - 1))
    mass = (counted * weight).sum(0)
    return torch.where(mass > 0, (stacked * agree).sum(0) / mass.clamp(min=1e-12), torch.zeros_like(sign))


def merge_weights(weights, n: int) -> list[float]:
    if weights is None:
        return [1.0] * n
    if len(weights) != n:
        raise ValueError(f"{len(weights)} merge weights for {n} experts; give one weight per teacher")
    return [float(x) for x in weights]


def check_density(density: float) -> None:
    if not 0 < density <= 1:
        raise ValueError(f"density must be in (0, 1], got {density}")


MERGES = {"soup": soup, "task_arithmetic": task_arithmetic, "ties": ties, "dare": dare, "della": della}
NEEDS_BASE = {"task_arithmetic", "ties", "dare", "della"}
# Their `normalize` (default true) divides the weighted sum of task vectors by the weights' sum.
WEIGHTED_MEANS = {"task_arithmetic", "dare"}
