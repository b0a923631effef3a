"""RL rewards, advantages and losses on hand-computed values."""
import math

import pytest
import torch

from chorus.rl.advantages import AdvantageError, group_normalized, mean_centered
from chorus.rl.losses import (aggregate, clipped_pg_loss, k3_kl, minibatch_counts, minibatch_normalizers,
                              sft_loss, token_logprobs)
from chorus.rl.rewards import RewardConfig, overlong_penalty, reward
from chorus.rl.dynamic_sampling import dynamic_sample


def test_rewards_coverage_penalties_bonus_and_harness_errors():
    cfg = RewardConfig(compile_penalty=-0.2, empty_penalty=-0.1, pass_bonus=0.5)
    assert reward("ok", 80.0, True, cfg) == pytest.approx(1.3)
    assert reward("ok", 40.0, False, cfg) == pytest.approx(0.4)
    assert reward("compile_error", None, False, cfg) == pytest.approx(-0.2)
    assert reward("empty", None, False, cfg) == pytest.approx(-0.1)
    assert reward("runtime_error", 30.0, False, cfg) == pytest.approx(0.3)  # coverage kept
    assert reward("harness_error", None, False, cfg) is None


def test_group_normalized_advantages_skip_harness_errors():
    std = math.sqrt(1 / 6)  # rewards 1, 0, 0.5 around mean 0.5
    adv = group_normalized([1.0, 0.0, 0.5, None], eps=0.0)
    assert adv == pytest.approx([0.5 / std, -0.5 / std, 0.0, 0.0])


def test_zero_variance_groups_give_zero_advantage():
    assert group_normalized([0.3, 0.3, 0.3]) == [0.0, 0.0, 0.0]
    assert group_normalized([0.7, None]) == [0.0, 0.0]
    assert mean_centered([0.2, 0.2]) == [0.0, 0.0]
    assert mean_centered([1.0, 0.0]) == pytest.approx([0.5, -0.5])


def test_group_of_one_with_std_normalisation_names_the_fix():
    with pytest.raises(AdvantageError, match="n_samples >= 2"):
        group_normalized([0.5])


def _logps(ratios):
    old = torch.log(torch.full((1, len(ratios)), 0.5))
    return old + torch.log(torch.tensor([ratios])), old


def test_asymmetric_clipping_hand_computed():
    logp, old = _logps([1.5, 0.5, 1.1])
    mask = torch.ones(1, 3)
    loss, stats = clipped_pg_loss(logp, old, torch.tensor([1.0]), mask, 0.2, 0.28, "token_mean", 3)
    assert float(loss) == pytest.approx(-(1.28 + 0.5 + 1.1) / 3)
    assert stats == pytest.approx({"clip_frac_low": 0.0, "clip_frac_high": 1 / 3, "ratio_dev_max": 0.5})
    loss, stats = clipped_pg_loss(logp, old, torch.tensor([-1.0]), mask, 0.2, 0.28, "token_mean", 3)
    assert float(loss) == pytest.approx((1.5 + 0.8 + 1.1) / 3)
    assert stats == pytest.approx({"clip_frac_low": 1 / 3, "clip_frac_high": 0.0, "ratio_dev_max": 0.5})
    logp, old = _logps([1.25])
    higher, _ = clipped_pg_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 1), 0.2, 0.28)
    symmetric, _ = clipped_pg_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 1), 0.2, 0.2)
    assert float(higher) == pytest.approx(-1.25) and float(symmetric) == pytest.approx(-1.2)


@pytest.mark.parametrize("mode", ["token_mean", "seq_mean", "seq_sum_const"])
def test_micro_batches_add_up_to_the_full_batch(mode):
    g = torch.Generator().manual_seed(0)
    logp, old = -torch.rand(4, 6, generator=g), -torch.rand(4, 6, generator=g)
    adv = torch.randn(4, generator=g)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0], [1, 0, 0, 0, 0, 0]])
    # computed once over the mini-batch (here the whole batch), as the trainer does
    (norm,) = minibatch_normalizers(minibatch_counts(mask, [slice(0, 4)], mode))
    assert norm == (13.0 if mode == "token_mean" else 4.0)
    kw = dict(mode=mode, normalizer=norm, max_tokens=6)
    full, _ = clipped_pg_loss(logp, old, adv, mask, **kw)
    parts = [clipped_pg_loss(logp[s], old[s], adv[s], mask[s], **kw)[0] for s in (slice(0, 1), slice(1, 4))]
    assert float(sum(parts)) == pytest.approx(float(full), abs=1e-6)


def test_seq_mean_weights_sequences_not_tokens():
    per_token = torch.tensor([[1.0, 1.0, 1.0, 1.0], [3.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]])
    assert float(aggregate(per_token, mask, "seq_mean", 2)) == pytest.approx((1.0 + 3.0) / 2)
    assert float(aggregate(per_token, mask, "token_mean", 5)) == pytest.approx(7.0 / 5)


def test_k3_kl_hand_computed_and_added_with_its_coefficient():
    kl = k3_kl(torch.log(torch.tensor([0.5])), torch.log(torch.tensor([0.25])))
    assert float(kl) == pytest.approx(0.5 + math.log(2) - 1)
    logp, old = _logps([1.0])
    ref = logp - math.log(2)
    loss, _ = clipped_pg_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 1), ref_logp=ref, kl_coef=0.1)
    assert float(loss) == pytest.approx(-1.0 + 0.1 * (0.5 + math.log(2) - 1))


@pytest.mark.parametrize("length, expected", [(50, 0.0), (80, 0.0), (90, -0.5), (100, -1.0), (101, -1.0)])
def test_overlong_buffer_formula(length, expected):
    assert overlong_penalty(length, max_length=100, buffer=20) == pytest.approx(expected)


def test_dynamic_sampling_refills_then_degrades_with_a_warning():
    good, flat = [0.1, 0.9], [0.5, 0.5]
    calls = []

    def refill(k):
        calls.append(k)
        return [good] if len(calls) == 1 else [flat, flat]

    with pytest.warns(RuntimeWarning, match="kept 3 of 4 groups after 2 refills"):
        kept, stats = dynamic_sample([good, flat, good, flat], lambda g: g, want=4, refill=refill, max_refills=2)
    assert kept == [good, good, good] and calls == [2, 1]
    assert stats["refills"] == 2 and stats["groups_seen"] == 7 and stats["zero_std_fraction"] == pytest.approx(4 / 7)


def test_sft_loss_matches_cross_entropy_on_labelled_tokens():
    logits = torch.randn(2, 5, 11, generator=torch.Generator().manual_seed(1))
    labels = torch.tensor([[-100, 3, 4, 5, 6], [-100, -100, 1, 2, -100]])
    expected = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 11), labels[:, 1:].reshape(-1),
                                                 ignore_index=-100)
    logp = token_logprobs(logits, labels.clamp(min=0))[0]  # the labelled tokens' log-probs (-100: any id)
    assert float(sft_loss(logp, labels)) == pytest.approx(float(expected), rel=1e-6)


def test_rl_algo_registry_defaults_and_overrides():
    from chorus.rl.algos import get_algo

    dapo = get_algo("dapo")
    assert (dapo.eps_low, dapo.eps_high, dapo.aggregation, dapo.kl_coef, dapo.dynamic_sampling) == (
        0.2, 0.28, "token_mean", 0.0, True)
    assert not dapo.needs_reference and get_algo("grpo", kl_coef=0.05).needs_reference
    assert get_algo("dr_grpo").advantage == "dr_grpo"
    with pytest.raises(ValueError, match="unknown rl_algo 'ppo'; choose one of"):
        get_algo("ppo")


def test_token_logprobs_align_with_the_tokens_they_score():
    # vocab 3, two positions of logits; token t is scored by the logits at t - 1
    logits = torch.log(torch.tensor([[[0.5, 0.25, 0.25], [0.1, 0.1, 0.8], [1 / 3, 1 / 3, 1 / 3]]]))
    ids = torch.tensor([[0, 1, 2]])
    logp, ent = token_logprobs(logits, ids, with_entropy=True)
    assert logp.tolist()[0] == pytest.approx([0.0, math.log(0.25), math.log(0.8)])
    h = -(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25))
    assert ent.tolist()[0] == pytest.approx([0.0, h, -(2 * 0.1 * math.log(0.1) + 0.8 * math.log(0.8))])
    hot, _ = token_logprobs(logits, ids, temperature=0.5)  # the engine sampled from softmax(logits / T)
    assert math.exp(hot[0, 1]) == pytest.approx(0.0625 / (0.25 + 0.0625 + 0.0625))


def test_step_stats_count_harness_errors_and_rejections():
    from chorus.rl.rollouts import sample_stats

    def row(status, reward):
        return {"status": status, "reward": reward, "passed": False, "text": status, "finish_reason": "stop",
                "completion_tokens": 3}

    stats = sample_stats([row("ok", 0.5), row("harness_error", None), row("rejected", 0.0), row("rejected", 0.0)])
    assert stats["harness_error_rate"] == 0.25 and stats["rejected_rate"] == 0.5
    assert stats["compile_rate"] == 0.25 and stats["reward_mean"] == pytest.approx(0.5 / 3)
