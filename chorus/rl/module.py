"""The RL LightningModule (manual optimisation). One training step = one rollout iteration:
the rollout (generation + simulation) runs in `on_train_batch_start`, outside `training_step`;
the step then does micro-batched forward/backward passes with one normaliser for the whole step,
clips through `self.clip_gradients` and takes one optimizer step."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import lightning as L
import torch

from ..config_schema import RLConf
from .algos import RLAlgo
from .losses import clipped_pg_loss, k3_kl, step_normalizer, token_logprobs
from .rollouts import RolloutBatch


@dataclass
class Hooks:
    """What the runner plugs into the module: the module owns the update, the runner the data."""
    rollout: Callable[[int], RolloutBatch]  # global step -> the step's batch (generation + simulation)
    state: Callable[[], dict] | None = None  # the data position, saved in each checkpoint
    restore: Callable[[dict], None] | None = None  # ... and restored on resume
    on_step: Callable[[int, RolloutBatch, dict], None] | None = None  # after each update, on rank 0
    sync_weights: Callable[[torch.nn.Module], None] | None = None  # a separate engine (vLLM) gets new weights


class RLModule(L.LightningModule):
    """`rl` gives the update's settings (lr, weight_decay, warmup_steps, micro_batch, grad_clip,
    temperature, max_new_tokens); `identity` is what a resumed checkpoint must match."""

    def __init__(self, model, algo: RLAlgo, rl: RLConf, hooks: Hooks, identity: dict, ref_model=None):
        super().__init__()
        self.automatic_optimization = False
        self.model, self.ref_model = model, ref_model
        self.algo, self.rl, self.hooks, self.identity = algo, rl, hooks, identity
        self.batch: RolloutBatch | None = None

    def on_train_batch_start(self, batch, batch_idx):
        self.model.eval()
        # Hooks run outside the precision's autocast: enter it, so the fp32 policy samples (and its
        # old log-probs come) at the precision the update computes in (bf16-mixed on GPUs; nothing on CPU).
        with self.trainer.precision_plugin.forward_context():
            self.batch = self.hooks.rollout(self.global_step)
        self.model.train()

    def training_step(self, batch, batch_idx):
        opt, sched = self.optimizers(), self.lr_schedulers()
        t0 = time.monotonic()
        opt.zero_grad(set_to_none=True)
        stats = self._backward(self.batch) if self.batch.input_ids.size(0) and self.batch.rows else {}
        if stats:
            stats["grad_norm"] = self._grad_norm()
            self.clip_gradients(opt, gradient_clip_val=self.rl.grad_clip, gradient_clip_algorithm="norm")
        # Without kept groups there are no gradients: the optimizer skips every parameter, but the
        # step still counts, so a run whose groups never vary still ends.
        opt.step()
        sched.step()
        if self.hooks.sync_weights:
            self.hooks.sync_weights(self.model)
        stats.update(self.batch.stats, update_s=time.monotonic() - t0, lr=sched.get_last_lr()[0],
                     update_skipped=float(not self.batch.rows))
        self.log_dict({f"train/{k}": float(v) for k, v in stats.items()}, on_step=True, batch_size=1)
        if self.hooks.on_step and self.trainer.is_global_zero:
            self.hooks.on_step(self.global_step, self.batch, stats)

    def _backward(self, b: RolloutBatch) -> dict:
        mode = self.algo.aggregation
        # One normaliser over the step (all micro-batches, all ranks): a token-mean loss does not
        # depend on how the batch is split. DDP averages gradients over ranks, hence the world size.
        counts = torch.tensor([step_normalizer(b.completion_mask, mode)], device=self.device)
        world = self.trainer.world_size
        if world > 1:
            counts = self.trainer.strategy.reduce(counts, reduce_op="sum")
        normalizer = float(counts) / world
        sums = {"loss": 0.0, "clip_frac_low": 0.0, "clip_frac_high": 0.0, "entropy": 0.0, "kl": 0.0}
        tokens = float(b.completion_mask.sum().clamp(min=1))
        for start in range(0, b.input_ids.size(0), self.rl.micro_batch):
            sl = slice(start, start + self.rl.micro_batch)
            ids, attn = b.input_ids[sl].to(self.device), b.attention_mask[sl].to(self.device)
            mask = b.completion_mask[sl].to(self.device)
            logits = self.model(input_ids=ids, attention_mask=attn).logits
            logp, entropy = token_logprobs(logits, ids, self.rl.temperature, with_entropy=True)
            loss, st = self.micro_loss(b, sl, ids, attn, mask, logits, logp, normalizer)
            self.manual_backward(loss)
            n = float(mask.sum())
            sums["loss"] += float(loss.detach())
            sums["clip_frac_low"] += st.get("clip_frac_low", 0.0) * n
            sums["clip_frac_high"] += st.get("clip_frac_high", 0.0) * n
            sums["entropy"] += float((entropy.detach() * mask).sum())
            sums["kl"] += st.get("kl_sum", 0.0)
        return {"loss": sums["loss"], **{k: sums[k] / tokens for k in ("clip_frac_low", "clip_frac_high", "entropy",
                                                                       "kl")}}

    def micro_loss(self, b: RolloutBatch, sl: slice, ids, attn, mask, logits, logp,
                   normalizer: float) -> tuple[torch.Tensor, dict]:
        """The policy-gradient loss of one micro-batch (subclasses swap in other objectives). `ids`,
        `attn` and `mask` are the slice's tensors already on the device."""
        ref = self._ref_logprobs(ids, attn) if self.algo.needs_reference else None
        loss, st = clipped_pg_loss(logp, b.old_logprobs[sl].to(self.device), b.advantages[sl].to(self.device), mask,
                                   self.algo.eps_low, self.algo.eps_high, self.algo.aggregation, normalizer,
                                   self.rl.max_new_tokens, ref, self.algo.kl_coef)
        if ref is not None:
            st["kl_sum"] = float((k3_kl(logp.detach(), ref) * mask).sum())
        return loss, st

    @torch.no_grad()
    def _ref_logprobs(self, ids, attn):
        if self.ref_model is not None:
            logits = self.ref_model(input_ids=ids, attention_mask=attn).logits
        else:  # LoRA: the reference is the base model, i.e. the policy with its adapter off
            with self.model.disable_adapter():
                logits = self.model(input_ids=ids, attention_mask=attn).logits
        return token_logprobs(logits, ids, self.rl.temperature)[0]

    def _grad_norm(self) -> float:
        norms = [p.grad.detach().norm() for p in self.model.parameters() if p.grad is not None]
        return float(torch.linalg.vector_norm(torch.stack(norms))) if norms else 0.0

    def configure_optimizers(self):
        params = [p for p in self.model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=self.rl.lr, weight_decay=self.rl.weight_decay)

        def schedule(step: int) -> float:  # linear warmup, then constant (RL runs are short and open-ended)
            return min(1.0, (step + 1) / max(1, self.rl.warmup_steps))

        return {"optimizer": opt, "lr_scheduler": {"scheduler": torch.optim.lr_scheduler.LambdaLR(opt, schedule)}}

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["chorus"] = {"identity": self.identity, "data": self.hooks.state() if self.hooks.state else {},
                                "torch_rng": torch.get_rng_state()}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        saved = checkpoint.get("chorus", {})
        if saved.get("identity") != self.identity:
            raise ValueError(f"the checkpoint was trained from {saved.get('identity')}, this run uses "
                             f"{self.identity}; resume with the same model (sft_stage, model, rl.lora) or set "
                             f"rl.resume=false to start over")
        if self.hooks.restore:
            self.hooks.restore(saved["data"])
        torch.set_rng_state(saved["torch_rng"])
