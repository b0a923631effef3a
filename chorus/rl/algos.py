"""The `rl_algo` registry. An algorithm's settings (clip range, KL, dynamic sampling, overlong
buffer) are RLAlgoConf's defaults in config/schema.py overlaid with conf/rl_algo/<name>.yaml, and
nowhere else; what is not a setting, its advantage estimator and loss aggregation, is ESTIMATORS
below. A new algorithm is one entry there and one YAML file."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from omegaconf import OmegaConf

from ..config.schema import CONF_DIR, RLAlgoConf
from .advantages import ADVANTAGES


@dataclass
class RLAlgo(RLAlgoConf):
    """An algorithm as the trainer uses it: its settings (RLAlgoConf, as composed) plus the two that
    are not settings, from ESTIMATORS. Build it with from_conf (chorus.train: the composed rl_algo) or
    get_algo (a library caller: the option's YAML over the schema)."""
    advantage: str = ""  # key of ADVANTAGES
    aggregation: str = ""  # token_mean | seq_mean | seq_sum_const (see losses.aggregate)

    def __post_init__(self):
        if self.advantage not in ADVANTAGES:
            raise ValueError(f"rl_algo {self.name}: unknown advantage {self.advantage!r}; use {sorted(ADVANTAGES)}")

    @property
    def needs_reference(self) -> bool:
        return self.kl_coef > 0


ESTIMATORS = {  # name -> (advantage, loss aggregation)
    "dapo": ("dapo", "token_mean"),  # group-normalised advantage; token mean over the whole step
    "grpo": ("grpo", "seq_mean"),  # group-normalised advantage; per-sequence mean
    "dr_grpo": ("dr_grpo", "seq_sum_const"),  # no std normalisation; constant (generation-budget) normaliser
}


def algo_settings(name: str, **overrides) -> dict:
    """What `rl_algo=<name>` composes to (RLAlgoConf + its YAML), with `overrides` on top; unknown
    keys and values of the wrong type raise, as on the command line."""
    option = OmegaConf.load(CONF_DIR / "rl_algo" / f"{name}.yaml")
    option.pop("defaults", None)
    return OmegaConf.to_container(OmegaConf.merge(RLAlgoConf, option, overrides), enum_to_str=True)


def from_conf(conf: RLAlgoConf) -> RLAlgo:
    """The algorithm the composed `rl_algo` group describes (its settings as they are, no reload)."""
    if conf.name not in ESTIMATORS:
        raise ValueError(f"unknown rl_algo {conf.name!r}; choose one of {sorted(ESTIMATORS)}")
    advantage, aggregation = ESTIMATORS[conf.name]
    return RLAlgo(**dataclasses.asdict(conf), advantage=advantage, aggregation=aggregation)


def get_algo(name: str, **overrides) -> RLAlgo:
    """`rl_algo=<name>` (and `overrides`) for a caller without Hydra: tests, OPD's unrouted=rl."""
    if name not in ESTIMATORS:
        raise ValueError(f"unknown rl_algo {name!r}; choose one of {sorted(ESTIMATORS)}")
    return from_conf(RLAlgoConf(**algo_settings(name, **overrides)))


# consolidation=opd is not an rl_algo choice (it reads none of rl_algo's settings). The teachers give
# the advantage, so it uses no group statistics: "dr_grpo" (no std normalisation) lets rl.group_size
# be 1. Its loss is a token mean with DAPO's clip-higher range, stated here and only here; the rest
# is RLAlgoConf's defaults: no KL, no dynamic sampling, no overlong shaping.
OPD_ALGO = RLAlgo(**{**dataclasses.asdict(RLAlgoConf()), "name": "opd", "eps_low": 0.2, "eps_high": 0.28},
                  advantage="dr_grpo", aggregation="token_mean")
