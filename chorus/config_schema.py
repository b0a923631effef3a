"""Hydra structured configs: the schema every YAML under conf/ is validated against."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional

from hydra.core.config_store import ConfigStore

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"


@dataclass
class TasksConf:
    name: str = "bundled"
    path: Optional[str] = None
    split: str = "all"
    limit: Optional[int] = None
    ids: Optional[List[str]] = None
    reference_dir: Optional[str] = None


@dataclass
class PolicyConf:
    name: str = "reference"
    dir: Optional[str] = None


@dataclass
class SimulatorConf:
    max_sim_time_ns: float = 2_000_000.0
    build_timeout_s: float = 180.0
    run_timeout_s: float = 30.0
    mem_limit_mb: int = 4096
    output_limit_mb: int = 64
    error_limit: int = 1000
    strict_instance: bool = False
    opt: str = "-O0"
    jobs: int = 2
    prebuilt_runtime: bool = True
    pch: bool = True
    ccache: bool = True
    cache: bool = True
    cache_dir: Optional[str] = None
    keep_workdir: bool = False
    naive_build: bool = False
    extra_verilator_flags: List[str] = field(default_factory=list)
    workers: Optional[int] = None  # parallel simulations; default: one per core


@dataclass
class EvaluateConf:
    tasks: Any = None
    policy: Any = None
    simulator: Any = None
    samples: int = 1
    progress: bool = True


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="evaluate_schema", node=EvaluateConf)
    cs.store(group="tasks", name="tasks_schema", node=TasksConf)
    cs.store(group="policy", name="policy_schema", node=PolicyConf)
    cs.store(group="simulator", name="simulator_schema", node=SimulatorConf)
