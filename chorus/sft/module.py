"""The SFT LightningModule: next-token loss on completion tokens, AdamW with warmup then linear
decay. Only trainers know Lightning; the loss itself is `chorus.rl.losses.sft_loss`, on the labelled
positions' log-probs only (rl/logprobs.py: no full-vocabulary logits over the prompt)."""
from __future__ import annotations

import logging

import lightning as L
import torch

from ..config.schema import TrainerConf
from ..optimizer import adamw, clip_grad_norm
from ..rl.logprobs import forward_logprobs
from ..rl.losses import sft_loss

log = logging.getLogger("chorus.sft")


class SFTModule(L.LightningModule):
    def __init__(self, model, lr: float = 1e-3, weight_decay: float = 0.0, warmup_steps: int = 10,
                 total_steps: int = 100, on_step=None, logit_chunk: int = 1024,
                 pack_sequences: bool | None = TrainerConf.pack_sequences, fused: bool = False):
        super().__init__()
        self.model = model
        self.lr, self.weight_decay = lr, weight_decay
        self.warmup_steps, self.total_steps = warmup_steps, max(total_steps, 1)
        self.losses: list[float] = []
        self.on_step = on_step  # (step, scalars) -> None, e.g. a W&B mirror
        self.logit_chunk = logit_chunk
        self.pack_sequences = pack_sequences  # trainer.pack_sequences (rl/packing.py)
        self.fused = fused  # trainer.fused_optimizer, resolved (chorus/optimizer.py)

    def training_step(self, batch, batch_idx):
        labels = batch["labels"]
        logp = forward_logprobs(self.model, batch["input_ids"], batch["attention_mask"], labels != -100,
                                chunk=self.logit_chunk, pack=self.pack_sequences).logp
        loss = sft_loss(logp, labels)
        self.losses.append(float(loss.detach()))
        if self.global_step % 20 == 0 or self.global_step + 1 == self.total_steps:
            log.info("sft step %d/%d loss %.4f", self.global_step + 1, self.total_steps, self.losses[-1])
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["input_ids"].size(0))
        if self.on_step:
            self.on_step(self.global_step + 1, {"loss": self.losses[-1], "lr": self.lr_schedulers().get_last_lr()[0]})
        return loss

    def configure_optimizers(self):
        opt = adamw(self.model.parameters(), self.lr, self.weight_decay, self.fused)

        def schedule(step: int) -> float:
            if step < self.warmup_steps:
                return (step + 1) / self.warmup_steps
            return max(0.0, (self.total_steps - step) / max(1, self.total_steps - self.warmup_steps))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        # the trainer's gradient_clip_val (sft_stage's grad_clip), clipped as RL clips (chorus/optimizer.py):
        # Lightning's own clip refuses a fused AdamW even under bf16-mixed
        clip_grad_norm(self, optimizer, gradient_clip_val or 0.0)
