"""Third-party output that tells a chorus user nothing, kept out of every job's console and log:
Lightning's hardware banner, its advertising tip and its fit-stopped notice (chorus logs its own
steps), a Lightning deprecation warning about torch internals, and the per-file progress bars of
transformers (loading and writing shards: a merge printed one per expert). Errors and warnings
that matter pass as before; chorus's own progress (chorus.progress) reports the long phases."""
from __future__ import annotations

import logging
import os
import warnings

# message starts of Lightning's rank-zero INFO lines that are dropped
LIGHTNING_NOISE = ("GPU available:", "TPU available:", "HPU available:", "💡 Tip:", "`Trainer.fit` stopped:")


class DropNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.getMessage()).lstrip().startswith(LIGHTNING_NOISE)


def quiet_third_party() -> None:
    """Install the filters (idempotent); an entry point calls it once as a job starts."""
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, DropNoise) for f in logger.filters):
            logger.addFilter(DropNoise())
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # also for the processes a job starts
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
