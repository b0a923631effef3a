"""What a policy-training run writes under <run dir>/ckpt, and when.

- last.ckpt, the one resume point: weights, optimizer (AdamW) state, LR schedule, data position and
  RNG, every rl.resume_every steps, at the end of fit, and at a SIGTERM/SIGINT (preemption.StopOnSignal).
  It is ~12 bytes per parameter (48 GB at 4B), so it is written rarely and overwritten each time.
- weights-step=N.ckpt, every rl.save_every steps: Lightning checkpoints without the optimizer state
  (4 bytes per parameter), kept; they are for evaluating or restarting from a step, never a resume.
"""
from __future__ import annotations

from pathlib import Path

import lightning as L
import torch


def snapshot_name(step: int) -> str:
    return f"weights-step={step}.ckpt"


class WeightSnapshots(L.Callback):
    """A weights-only checkpoint every `every` steps (0: none). It runs before StopOnSignal, so the
    step a signal stops at still gets its snapshot."""

    def __init__(self, ckpt_dir: Path, every: int):
        self.ckpt_dir, self.every = Path(ckpt_dir), every

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if self.every and step % self.every == 0:  # every rank calls save_checkpoint; rank 0 writes
            trainer.save_checkpoint(self.ckpt_dir / snapshot_name(step), weights_only=True)


def resume_checkpoint(ckpt_dir: Path, every: int) -> L.pytorch.callbacks.ModelCheckpoint:
    """Lightning's checkpoint callback keeping only last.ckpt, written every `every` steps and at the
    end of fit (save_last), with the optimizer state."""
    return L.pytorch.callbacks.ModelCheckpoint(dirpath=ckpt_dir, every_n_train_steps=every, save_last=True,
                                               save_top_k=0)


def resume_step(path: str) -> int:
    """The step of a checkpoint a run resumes from; a weights-only snapshot cannot resume (Lightning
    would fail on the missing optimizer state deep inside fit), so it is refused here in one line."""
    state = torch.load(path, map_location="cpu", weights_only=False, mmap=True)
    if "optimizer_states" not in state:
        raise ValueError(f"{path} holds weights only (a snapshot); resume from a resume point "
                         "(<run dir>/ckpt/last.ckpt)")
    return int(state["global_step"])
