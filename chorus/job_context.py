"""What every training job shares, passed to the library as one object instead of a long list of
positional arguments. chorus.train builds it from the composed config; tests build it directly."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .sim import SimConfig
from .tracking.progress import Progress


@dataclass
class JobContext:
    out: Path  # the run dir: results, checkpoints, progress.jsonl
    fmt: str  # the stimulus format's name (chorus.stimulus.formats)
    sim: SimConfig = field(default_factory=SimConfig)
    workers: int | None = None  # parallel simulations; None = one per core
    seed: int = 0
    # the dtype of the models not trained (reference, teachers, vLLM engine, evaluation copies); a
    # trained policy always keeps fp32 masters (rl/run.py)
    dtype: str = "float32"
    meta: dict = field(default_factory=dict)  # summary.json's run metadata (tracking/record.run_metadata)
    on_step: Callable[[int, dict], None] | None = None  # hears each training step's scalars
    # Long phases report here. The default only logs, so library callers need not give a run dir twice.
    progress: Progress = field(default_factory=lambda: Progress(None))

    def __post_init__(self):
        self.out = Path(self.out)
