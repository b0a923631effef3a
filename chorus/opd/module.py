"""The OPD LightningModule: the RL module's step (rollout outside training_step, micro-batches
under one normaliser, clipping, one optimizer step) with a distillation objective.

mode=pg: per-token advantage -(log pi_s - log pi_t) through the clipped policy-gradient loss.
mode=direct: a divergence over the vocabulary at each sampled position (reverse KL or GKD's JSD)
between the two distributions at rl.temperature, the one the student samples from; it needs the
routed teachers in the update, so it keeps them in memory. Both run on completion positions only, a
chunk of positions' logits at a time (rl/logprobs.py)."""
from __future__ import annotations

import torch

from ..config.schema import ConsolidationConf
from ..rl.logprobs import completion_hidden
from ..rl.losses import clipped_pg_loss
from ..rl.module import RLModule
from .losses import DIVERGENCES, chunked_divergence, pg_advantages, sequence_kd


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
        self.kd_coef = opd.kd_coef

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
        loss, stats = self._on_policy_loss(b, sl, ids, attn, mask - kd_mask, fwd, normalizer, kd.tolist())
        if kd.any():
            loss = loss + self.kd_coef * sequence_kd(fwd.logp, kd_mask, normalizer)
        return loss, stats

    def _on_policy_loss(self, b, sl: slice, ids, attn, mask, fwd, normalizer: float, kd: list[bool]):
        logp = fwd.logp
        t_logp = b.teacher_logprobs[sl, :ids.size(1)].to(self.device)
        # an unrouted task's own sample (consolidation.unrouted=rl) has no teacher
        own = torch.tensor([t is None for t in b.teacher_of[sl]], dtype=torch.bool, device=self.device)
        distilled = mask * (~own)[:, None].to(mask.dtype)  # the rows a teacher scored
        stats = {"kl_sum": float(((logp.detach() - t_logp) * distilled).sum())}
        if self.mode == "pg":
            # a row's group advantage (consolidation.unrouted=rl, routed=rl|both; else 0), plus the
            # teacher's per-token signal on the rows a teacher scored
            gap = torch.where(own[:, None], torch.zeros_like(logp), pg_advantages(logp, t_logp))
            adv = (b.advantages[sl].to(self.device, logp.dtype)[:, None] + gap) * mask
            old = b.old_logprobs[sl, :ids.size(1)].to(self.device)
            loss, st = clipped_pg_loss(logp, old, adv, mask, self.algo.eps_low, self.algo.eps_high, "token_mean",
                                       normalizer, is_weights=self._tis(b, sl, mask))
            return loss, {**st, **stats}
        # direct: the divergence at each completion position, between the student's head on its hidden
        # states (fwd) and the routed teacher's, a chunk of positions at a time (rl/logprobs.py)
        names = [n if not k else None for n, k in zip(b.teacher_of[sl], kd)]  # KD rows: no divergence term
        rows_of = fwd.select.nonzero()[:, 0]  # the row of each of the N completion positions
        loss = fwd.hidden.new_zeros((), dtype=torch.float32)
        kw = {"beta": self.beta} if self.divergence == "jsd" else {}
        for name in dict.fromkeys(n for n in names if n is not None):
            rows = torch.tensor([i for i, n in enumerate(names) if n == name], device=self.device)
            with self.teachers.use(name) as teacher, torch.no_grad():  # its logits: chunk by chunk, below
                t_hidden, t_head, _ = completion_hidden(teacher, ids[rows], attn[rows], mask[rows],
                                                          self.pack_sequences)
            keep = torch.isin(rows_of, rows)  # this teacher's rows' positions, in the same (row-major) order
            loss = loss + chunked_divergence(DIVERGENCES[self.divergence], fwd.head, fwd.hidden[keep], t_head,
                                             t_hidden, normalizer, self.logit_chunk, temperature=self.rl.temperature,
                                             **kw)
        return loss, stats
