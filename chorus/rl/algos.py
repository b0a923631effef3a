"""The `rl_algo` registry: each algorithm is a choice of advantage, loss aggregation, clipping and
KL, plus its YAML in conf/rl_algo/. A new algorithm is one entry here and one YAML file."""
from __future__ import annotations

from dataclasses import dataclass

from .advantages import ADVANTAGES


@dataclass(frozen=True)
class RLAlgo:
    name: str
    advantage: str  # key of ADVANTAGES
    aggregation: str  # token_mean | seq_mean | seq_sum_const (see losses.aggregate)
    eps_low: float = 0.2
    eps_high: float = 0.2
    kl_coef: float = 0.0  # > 0 needs a reference model (k3 estimator)
    dynamic_sampling: bool = False
    overlong_buffer: int = 0  # tokens of DAPO's soft overlong buffer; 0 = off
    std_threshold: float = 1e-3  # dynamic sampling keeps groups whose reward std is above this
    max_refills: int = 2  # dynamic sampling's bounded refill

    def __post_init__(self):
        if self.advantage not in ADVANTAGES:
            raise ValueError(f"rl_algo {self.name}: unknown advantage {self.advantage!r}; use {sorted(ADVANTAGES)}")

    @property
    def needs_reference(self) -> bool:
        return self.kl_coef > 0


RL_ALGOS = {
    # DAPO: clip-higher, token-mean over the whole step, no KL, dynamic sampling, overlong shaping.
    "dapo": RLAlgo("dapo", "dapo", "token_mean", 0.2, 0.28, 0.0, True, 64),
    # GRPO: symmetric clip, per-sequence mean, optional k3 KL against a reference.
    "grpo": RLAlgo("grpo", "grpo", "seq_mean", 0.2, 0.2, 0.0),
    # Dr. GRPO: no std normalisation, constant (generation-budget) normaliser.
    "dr_grpo": RLAlgo("dr_grpo", "dr_grpo", "seq_sum_const", 0.2, 0.2, 0.0),
}


def get_algo(name: str, **overrides) -> RLAlgo:
    if name not in RL_ALGOS:
        raise ValueError(f"unknown rl_algo {name!r}; choose one of {sorted(RL_ALGOS)}")
    base = RL_ALGOS[name]
    fields = {**base.__dict__, **{k: v for k, v in overrides.items() if k in base.__dict__}}
    return RLAlgo(**fields)
