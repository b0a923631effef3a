"""Distillation losses, as pure tensor functions.

Shapes: log-probs and masks [B, T]; positions are aligned as in `chorus.rl.losses.token_logprobs`
(position t scores token t). Student and teacher log-probs are both taken at the student's sampling
temperature T: the student samples from that distribution, so that is the one to pull towards the
teacher's (T=1: the plain distributions)."""
from __future__ import annotations

import torch


def pg_advantages(student_logp: torch.Tensor, teacher_logp: torch.Tensor) -> torch.Tensor:
    """The per-token advantage -(log pi_s - log pi_t), a reward for tokens the teacher
    likes more than the student does (no gradient flows through it)."""
    return -(student_logp - teacher_logp).detach()


def sequence_kd(student_logp: torch.Tensor, mask: torch.Tensor, normalizer: float) -> torch.Tensor:
    """opd.teacher_samples: sequence-level KD (Kim & Rush 2016) on a teacher's own samples, the
    negative log-likelihood of the teacher's tokens under the student at the sampling temperature,
    summed over `mask`'s positions and divided by the step's `normalizer`. It is the sampled forward
    KL(pi_t || pi_s): the per-token advantage above only scores tokens the student itself drew, so a
    teacher's answer that the student never samples (another opening) gives them no signal."""
    return -(student_logp * mask).sum() / normalizer
