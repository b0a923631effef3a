"""The OPD LightningModule: the RL module's step (rollout outside training_step, micro-batches
under one normaliser, clipping, one optimizer step) with the distillation objective: each routed
row's per-token advantage -(log pi_s - log pi_t) through the clipped policy-gradient loss (plus its
group advantage under routed=both; an unrouted=rl row has only that), and the teachers' own samples
(teacher_samples) as sequence-level KD targets."""
from __future__ import annotations

import torch

from ..rl.losses import clipped_pg_loss
from ..rl.module import RLModule
from .losses import pg_advantages, sequence_kd


class OPDModule(RLModule):
    """RLModule's arguments, plus the teachers' models (opd/rollouts.TeacherModels), which score on the
    student's device."""

    def __init__(self, *args, teachers=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.teachers = teachers

    def on_fit_start(self) -> None:
        # The strategy has put the student on its device by now: the teachers score there too.
        super().on_fit_start()
        if self.teachers is not None:
            self.teachers.to(self.device)

    def micro_loss(self, b, sl: slice, ids, attn, mask, fwd, normalizer: float):
        # The student's own rows take the on-policy objective; a teacher's samples (opd.teacher_samples)
        # take sequence-level KD. One normaliser (the mini-batch's tokens, both kinds) for both terms.
        kd = (b.kd_rows[sl] if b.kd_rows is not None else torch.zeros(ids.size(0), dtype=torch.bool))
        kd_mask = mask * kd.to(self.device)[:, None].to(mask.dtype)
        loss, stats = self._on_policy_loss(b, sl, mask - kd_mask, fwd, normalizer)
        if kd.any():
            loss = loss + sequence_kd(fwd.logp, kd_mask, normalizer)
        return loss, stats

    def _on_policy_loss(self, b, sl: slice, mask, fwd, normalizer: float):
        logp = fwd.logp
        t_logp = b.teacher_logprobs[sl, :logp.size(1)].to(self.device)
        # an unrouted task's own sample (consolidation.unrouted=rl) has no teacher
        own = torch.tensor([t is None for t in b.teacher_of[sl]], dtype=torch.bool, device=self.device)
        distilled = mask * (~own)[:, None].to(mask.dtype)  # the rows a teacher scored
        stats = {"kl_sum": float(((logp.detach() - t_logp) * distilled).sum())}
        # a row's group advantage (unrouted=rl, routed=both; else 0), plus the teacher's per-token signal
        # on the rows a teacher scored
        gap = torch.where(own[:, None], torch.zeros_like(logp), pg_advantages(logp, t_logp))
        adv = (b.advantages[sl].to(self.device, logp.dtype)[:, None] + gap) * mask
        old = b.old_logprobs[sl, :logp.size(1)].to(self.device)
        loss, st = clipped_pg_loss(logp, old, adv, mask, self.algo.eps_low, self.algo.eps_high, "token_mean",
                                   normalizer, is_weights=self._tis(b, sl, mask))
        return loss, {**st, **stats}
