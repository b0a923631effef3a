"""Run SFT on examples and export the result as a Hugging Face checkpoint."""
from __future__ import annotations

import random
from pathlib import Path

import lightning as L
import torch
from torch.utils.data import DataLoader

from ..config.schema import TrainerConf
from ..policy.models import export_merged, load_model
from ..rl.preemption import StopOnSignal
from ..trainer_setup import build_trainer, fused_optimizer, lightning_errors, use_gradient_checkpointing
from .data import Example
from .dataset import Collator, encode
from .module import SFTModule


def train_sft(init: str, examples: list[Example], out_dir: str | Path, steps: int = 100, batch_size: int = 4,
              lr: float = 1e-3, max_tokens: int = 4096, seed: int = 0, warmup_steps: int = 10,
              grad_clip: float = 1.0, threads: int | None = None, trainer: TrainerConf | None = None,
              on_step=None) -> dict:
    """Fine-tune the checkpoint at `init` for `steps` optimizer steps on `trainer`'s accelerator,
    devices, strategy and precision (default: the CPU in float32); returns losses and the export path
    (on rank 0; other ranks of a multi-process strategy return {})."""
    trainer = trainer or TrainerConf()
    if trainer.strategy == "fsdp":  # its module does not shard the model, and its export reads it on rank 0 only
        raise ValueError("SFT does not run under trainer=fsdp yet (only RL and OPD do); use trainer=ddp or trainer=gpu")
    L.seed_everything(seed, workers=True, verbose=False)
    if threads:  # default: torch's own choice, which OMP_NUM_THREADS sets
        torch.set_num_threads(threads)
    model, tok = load_model("hf", path=str(init), dtype="float32")  # fp32 masters, as for RL (rl/run.py)
    model.train()
    rows = [r for e in examples if (r := encode(tok, e, max_tokens)) is not None]
    if not rows:
        raise ValueError(f"no SFT example fits max_tokens={max_tokens}; raise it or shorten the prompts")
    random.Random(seed).shuffle(rows)
    loader = DataLoader(rows, batch_size=batch_size, shuffle=True, collate_fn=Collator(tok.pad_token_id),
                        generator=torch.Generator().manual_seed(seed))
    use_gradient_checkpointing(model, trainer)
    module = SFTModule(model, lr=lr, warmup_steps=warmup_steps, total_steps=steps, on_step=on_step,
                       logit_chunk=trainer.logit_chunk, pack_sequences=trainer.pack_sequences,
                       fused=fused_optimizer(trainer))
    fit = sft_trainer(trainer, steps, grad_clip, out_dir)
    with lightning_errors():
        fit.fit(module, loader)
    if fit.interrupted:
        raise KeyboardInterrupt
    if not fit.is_global_zero:
        return {}
    export = export_merged(module.model, tok, Path(out_dir) / "hf")
    return {"losses": module.losses, "checkpoint": str(export), "examples": len(rows)}


def sft_trainer(trainer: TrainerConf, steps: int, grad_clip: float, out_dir: str | Path) -> L.Trainer:
    """SFT's Lightning trainer on the job's `trainer` settings (conf/trainer: cpu, gpu, ddp, fsdp). The
    model keeps fp32 master weights; `trainer.precision` (bf16-mixed on GPUs) sets the compute. A SIGTERM
    or SIGINT stops it after the step under way (preemption.Preempted; a stage starts again when re-run)."""
    return build_trainer(trainer, max_steps=steps, callbacks=[StopOnSignal()], logger=False, enable_checkpointing=False,
                         gradient_clip_val=grad_clip, default_root_dir=str(out_dir))
