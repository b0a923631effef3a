"""Distillation losses on the student's own samples, as pure tensor functions.

Shapes: logits [B, T, V], log-probs and masks [B, T]; positions are aligned as in
`chorus.rl.losses.token_logprobs` (position t scores token t). Both modes compare student and
teacher at the student's sampling temperature T (logits / T, as token_logprobs does): the student
samples from that distribution, so that is the one to pull towards the teacher's (T=1: the plain
distributions)."""
from __future__ import annotations

import math

import torch
from torch.utils.checkpoint import checkpoint


def pg_advantages(student_logp: torch.Tensor, teacher_logp: torch.Tensor) -> torch.Tensor:
    """opd.mode=pg: the per-token advantage -(log pi_s - log pi_t), a reward for tokens the teacher
    likes more than the student does (no gradient flows through it)."""
    return -(student_logp - teacher_logp).detach()


def _log_softmax_at(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """The distribution sampled at `temperature`: the one place the direct divergences apply it.
    Computed in fp32 at least (bf16 logits are upcast); float64 stays float64 (the exact tests)."""
    return torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)) / temperature, -1)


def reverse_kl(student_logits: torch.Tensor, teacher_logits: torch.Tensor, mask: torch.Tensor,
               normalizer: float, *, temperature: float) -> torch.Tensor:
    """opd.mode=direct: sum over the sampled positions of KL(pi_s || pi_t) over the vocabulary, both
    at the sampling temperature."""
    s = _log_softmax_at(student_logits, temperature)
    t = _log_softmax_at(teacher_logits, temperature)
    per_pos = (s.exp() * (s - t)).sum(-1)
    return (per_pos * mask).sum() / normalizer


def generalized_jsd(student_logits: torch.Tensor, teacher_logits: torch.Tensor, mask: torch.Tensor,
                    normalizer: float, beta: float = 0.5, *, temperature: float) -> torch.Tensor:
    """GKD's generalised JSD: beta KL(pi_t || m) + (1 - beta) KL(pi_s || m), m = beta pi_t + (1 - beta) pi_s,
    both distributions at the sampling temperature. beta -> 0 approaches forward KL's behaviour,
    beta -> 1 reverse KL's (scaled)."""
    if not 0 < beta < 1:
        raise ValueError(f"opd.beta must be in (0, 1) for jsd, got {beta}; use divergence=reverse_kl for the limit")
    s = _log_softmax_at(student_logits, temperature)
    t = _log_softmax_at(teacher_logits, temperature)
    m = torch.logsumexp(torch.stack([s + math.log(1 - beta), t + math.log(beta)]), dim=0)
    kl_t = (t.exp() * (t - m)).sum(-1)
    kl_s = (s.exp() * (s - m)).sum(-1)
    return ((beta * kl_t + (1 - beta) * kl_s) * mask).sum() / normalizer


def sequence_kd(student_logp: torch.Tensor, mask: torch.Tensor, normalizer: float) -> torch.Tensor:
    """opd.teacher_samples: sequence-level KD (Kim & Rush 2016) on a teacher's own samples, the
    negative log-likelihood of the teacher's tokens under the student at the sampling temperature,
    summed over `mask`'s positions and divided by the step's `normalizer`. It is the sampled forward
    KL(pi_t || pi_s): the reverse-KL terms above only score tokens the student itself drew, so a
    teacher's answer that the student never samples (another opening) gives them no signal."""
    return -(student_logp * mask).sum() / normalizer


DIVERGENCES = {"reverse_kl": reverse_kl, "jsd": generalized_jsd}


def chunked_divergence(divergence, s_head, s_hidden, t_head, t_hidden, normalizer: float, chunk: int,
                       **kw) -> torch.Tensor:
    """`divergence` summed over N positions given as features and heads ([N, H] hidden states through
    each model's output head: rl/logprobs.Forward), `chunk` positions at a time. Each student chunk is
    checkpointed, so only one chunk's [chunk, vocab] logits (student and teacher) exist at once."""
    def piece(h, t):
        with torch.no_grad():
            t_logits = t_head(t)
        s_logits = s_head(h)
        ones = s_logits.new_ones(1, s_logits.size(0))
        return divergence(s_logits[None], t_logits[None].to(s_logits.dtype), ones, normalizer, **kw)

    total = s_hidden.new_zeros((), dtype=torch.float32)
    for i in range(0, s_hidden.size(0), chunk):
        h, t = s_hidden[i:i + chunk], t_hidden[i:i + chunk]
        part = checkpoint(piece, h, t, use_reentrant=False) if h.requires_grad else piece(h, t)
        total = total + part
    return total
