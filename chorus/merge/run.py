"""Merge a teacher pool into one checkpoint and evaluate it like any run."""
from __future__ import annotations

import dataclasses

from ..config.schema import MergeConf, RLConf, TeacherPoolConf, TrainerConf
from ..config.job_context import JobContext
from ..heldout import evaluate_checkpoint
from .stream import merge_checkpoints


def merge_options(cons: MergeConf) -> dict:
    """What merge_checkpoints takes besides the checkpoints: the method's settings (its schema's fields:
    the weights and the method's own parameters, schema.MERGE_SCHEMAS)."""
    return {k: v for k, v in dataclasses.asdict(cons).items() if k != "name"}


def merge_and_evaluate(cons: MergeConf, pool: TeacherPoolConf, eval_tasks, rl: RLConf,
                       ctx: JobContext, trainer: TrainerConf | None = None) -> dict:
    """Merge the pool's experts with cons.name (task vectors against pool.base) into <run dir>/hf and
    evaluate the result on the held-out tasks as rl.eval_* says, on `trainer`'s device and precision
    (the merge itself streams tensors on the CPU)."""
    ctx.progress.start("merge", 1)  # streamed tensor by tensor; minutes for billion-parameter experts
    info = merge_checkpoints(cons.name, [t.checkpoint for t in pool.teachers], ctx.out / "hf", base=pool.base,
                             **merge_options(cons))
    ctx.progress.update("merge", 1, 1)
    return evaluate_checkpoint(info["checkpoint"], eval_tasks, rl, ctx, meta=info, trainer=trainer)
