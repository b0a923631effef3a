"""What every training job shares, passed to the library as one object instead of a long list of
positional arguments. chorus.train builds it from the composed config; tests build it directly."""
from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..sim import SimConfig
from ..sim.executor import Executor, make_executor
from ..tracking.progress import Progress


@dataclass
class JobContext:
    out: Path  # the run dir: results, checkpoints, progress.jsonl
    fmt: str  # the stimulus format's name (chorus.stimulus.formats)
    sim: SimConfig = field(default_factory=SimConfig)
    workers: int | None = None  # parallel simulations; None = one per core
    # where the job's simulations run; default: sim.executor with `workers` (chorus.train passes its own)
    executor: Executor | None = None
    seed: int = 0
    # the dtype of the models not trained (reference, teachers, vLLM engine, evaluation copies); a
    # trained policy always keeps fp32 masters (rl/run.py)
    dtype: str = "float32"
    meta: dict = field(default_factory=dict)  # summary.json's run metadata (tracking/record.run_metadata)
    on_step: Callable[[int, dict], None] | None = None  # hears each training step's scalars
    # Long phases report here. The default only logs, so library callers need not give a run dir twice.
    progress: Progress = field(default_factory=lambda: Progress(None))
    # Seconds the job spent generating, waiting on simulations, updating weights (summary.json "timing";
    # REPORT.md's steps table): accumulated by protocol.direct.run_direct and the RL loop.
    timing: dict[str, float] = field(default_factory=dict)

    def __post_init__(self):
        self.out = Path(self.out)
        if self.executor is None:
            self.executor = make_executor(self.sim, self.workers)


# Where launchers put a process's global rank (torchrun, Lightning's ddp launcher, SLURM, LSF): the
# variables, and the order, Lightning reads before fit has set up torch.distributed.
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")


def process_rank(environ=os.environ) -> int:
    """This process's rank in a multi-process job, 0 for a single process. Ranks other than 0 train but
    leave the run's records (run.json, the W&B run, the printed result) to rank 0."""
    for name in RANK_VARIABLES:
        if environ.get(name, "").strip():
            return int(environ[name])
    return 0


class Preempted(Exception):
    """The run stopped on a signal; `checkpoint` resumes it (None: the run starts again)."""

    def __init__(self, signum: int, step: int, steps: int, checkpoint: Path | None):
        self.signum, self.step, self.checkpoint = signum, step, checkpoint
        resume = (f"its checkpoint {checkpoint} resumes it: run the same command again" if checkpoint
                  else "this stage has no checkpoint: run the same command to start it again")
        super().__init__(f"stopped by {signal.Signals(signum).name} after step {step}/{steps}; {resume}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # the shell's convention for "ended by this signal"
