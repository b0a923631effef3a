"""SIGTERM (a scheduler's pre-emption, `kill`, a cancelled job) and SIGINT (Ctrl-C) end a training
run at the end of the step under way, with a resumable checkpoint, as an error: never as a finished run.

Lightning's own SIGTERM handling leaves fit by a SystemExit with no code, so the process exits 0
without an export or a summary, and a pipeline reads that as a finished step. Stopping at the end of
a step keeps the checkpoint consistent (weights, optimizer, the task sampler's position and the logs
all at that step); a second SIGINT interrupts at once, as Python's default does.
"""
from __future__ import annotations

import signal
from pathlib import Path

import lightning as L

from ..config.job_context import Preempted

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopOnSignal(L.Callback):
    """Installed for the length of fit; chains to whatever handled the signals before (Lightning's
    SIGTERM notifier, which also stops a launcher's child ranks)."""

    def __init__(self, checkpoint: Path | None = None):
        self.checkpoint = checkpoint  # where the resumable checkpoint goes (None: SFT, which does not resume)
        self.received: int | None = None
        self._previous: dict[int, object] = {}

    def _handler(self, signum, frame) -> None:
        if signum == signal.SIGINT and self.received == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: stop now
        self.received = signum
        previous = self._previous.get(signum)
        if callable(previous) and signum != signal.SIGINT:
            previous(signum, frame)

    def on_train_start(self, trainer, pl_module) -> None:
        try:
            for s in SIGNALS:
                self._previous[s] = signal.signal(s, self._handler)
        except ValueError:  # not the main thread: signals stay with whoever handles them there
            self._previous.clear()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        # every rank stops at the same step when any rank was signalled (the decision is a collective)
        stop = trainer.strategy.reduce_boolean_decision(self.received is not None, all=False)
        if not stop:
            return
        if self.checkpoint is not None:
            trainer.save_checkpoint(self.checkpoint)
        raise Preempted(self.received or signal.SIGTERM, trainer.global_step, trainer.max_steps,
                        self.checkpoint)

    def teardown(self, trainer, pl_module, stage: str) -> None:
        for s, previous in self._previous.items():
            signal.signal(s, previous)
        self._previous.clear()

    def on_exception(self, trainer, pl_module, exception) -> None:  # fit's teardown hook does not run then
        self.teardown(trainer, pl_module, "fit")
