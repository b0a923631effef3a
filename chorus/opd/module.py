"""The OPD LightningModule: the RL module's step (rollout outside training_step, micro-batches
under one normaliser, clipping, one optimizer step) with a distillation objective.

mode=pg: per-token advantage -(log pi_s - log pi_t) through the clipped policy-gradient loss.
mode=direct: a divergence over the vocabulary at each sampled position (reverse KL or GKD's JSD)
between the two distributions at rl.temperature, the one the student samples from; it needs the
routed teachers' logits in the update, so it keeps them in memory."""
from __future__ import annotations

import torch

from ..config_schema import ConsolidationConf
from ..rl.losses import clipped_pg_loss
from ..rl.module import RLModule
from .losses import DIVERGENCES, pg_advantages


class OPDModule(RLModule):
    """RLModule's arguments, plus `opd` (consolidation.mode, divergence, beta) and the teachers'
    models (opd/rollouts.TeacherModels), which mode=direct runs in the update."""

    def __init__(self, *args, opd: ConsolidationConf, teachers=None, **kwargs):
        super().__init__(*args, **kwargs)
        # The schema's enums refuse bad values at composition; a library caller may pass plain strings.
        if opd.mode not in ("pg", "direct"):
            raise ValueError(f"unknown opd.mode {opd.mode!r}; use pg or direct")
        if opd.divergence not in DIVERGENCES:
            raise ValueError(f"unknown opd.divergence {opd.divergence!r}; use one of {sorted(DIVERGENCES)}")
        self.mode, self.divergence, self.beta, self.teachers = opd.mode, opd.divergence, opd.beta, teachers

    def on_fit_start(self) -> None:
        # The strategy has put the student on its device by now: the teachers score there too.
        super().on_fit_start()
        if self.teachers is not None:
            self.teachers.to(self.device)

    def micro_loss(self, b, sl: slice, ids, attn, mask, logits, logp, normalizer: float):
        t_logp = b.teacher_logprobs[sl].to(self.device)
        stats = {"kl_sum": float(((logp.detach() - t_logp) * mask).sum())}
        if self.mode == "pg":
            adv = pg_advantages(logp, t_logp) * mask
            loss, st = clipped_pg_loss(logp, b.old_logprobs[sl].to(self.device), adv, mask, self.algo.eps_low,
                                       self.algo.eps_high, "token_mean", normalizer)
            return loss, {**st, **stats}
        t_logits = torch.zeros_like(logits)
        names = b.teacher_of[sl]
        for name in dict.fromkeys(names):
            rows = torch.tensor([i for i, n in enumerate(names) if n == name], device=self.device)
            with self.teachers.use(name) as teacher, torch.no_grad():
                t_logits[rows] = teacher(input_ids=ids[rows], attention_mask=attn[rows]).logits.to(logits.dtype)
        kw = {"beta": self.beta} if self.divergence == "jsd" else {}
        # position t-1's distribution predicts token t: align logits with the next token's mask
        loss = DIVERGENCES[self.divergence](logits[:, :-1], t_logits[:, :-1], mask[:, 1:], normalizer,
                                            temperature=self.rl.temperature, **kw)
        return loss, stats
