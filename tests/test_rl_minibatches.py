"""Several optimizer steps per rollout (DAPO as published): mini-batch slicing and normalisers by
hand, and the real RLModule under a real Lightning trainer on a synthetic rollout (no simulator):
old log-probs recomputed by the policy, the clip acting only once the policy has moved, and
global_step still counting rollouts."""
from types import SimpleNamespace

import lightning as L
import pytest
import torch
from lightning.pytorch.plugins.precision.amp import MixedPrecision

from chorus.config.schema import RLConf
from chorus.rl.algos import get_algo
from chorus.rl.losses import minibatch_counts, minibatch_normalizers, minibatch_slices
from chorus.rl.module import Hooks, RLModule
from chorus.rl.rollouts import RolloutBatch
from helpers import gradient_recorder


def test_minibatch_slices_are_contiguous_and_even():
    assert minibatch_slices(8, 4) == [slice(0, 2), slice(2, 4), slice(4, 6), slice(6, 8)]
    assert minibatch_slices(7, 3) == [slice(0, 3), slice(3, 5), slice(5, 7)]
    assert minibatch_slices(1, 2) == [slice(0, 1), slice(1, 1)]
    with pytest.raises(ValueError, match="mini_batches"):
        minibatch_slices(4, 0)


def test_each_minibatch_has_its_own_normaliser_hand_computed():
    mask = torch.tensor([[0, 1, 1, 1],   # 3 completion tokens
                         [0, 0, 1, 0],   # 1
                         [1, 1, 1, 1],   # 4
                         [0, 1, 1, 0],   # 2
                         [0, 0, 0, 1]])  # 1
    parts = minibatch_slices(5, 2)  # rows 0-2, rows 3-4
    normalizers = lambda parts, mode: minibatch_normalizers(minibatch_counts(mask, parts, mode))  # noqa: E731
    assert normalizers(parts, "token_mean") == [8.0, 3.0]
    assert normalizers(parts, "seq_mean") == [3.0, 2.0]
    assert normalizers(minibatch_slices(1, 2), "token_mean")[1] == 1.0  # an empty one


class TinyPolicy(torch.nn.Module):
    """Embedding -> logits over a 7-token vocabulary, called like a transformers causal LM."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(7, 5)
        self.out = torch.nn.Linear(5, 7)
        self.widths = []  # the padded width of each forward pass

    def forward(self, input_ids, attention_mask=None, use_cache=None):  # chorus asks for no KV cache
        assert use_cache is False
        self.widths.append(input_ids.size(1))
        return SimpleNamespace(logits=self.out(torch.tanh(self.emb(input_ids))))


def synthetic_batch(ragged: bool = False) -> RolloutBatch:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 7, (8, 6), generator=g)
    comp = torch.zeros(8, 6, dtype=torch.long)
    comp[:, 2:] = 1
    attn = torch.ones_like(ids)
    if ragged:  # right-padded rows of 6, 3, 4, 6, 3, 3, 5, 6 tokens
        for row, n in enumerate([6, 3, 4, 6, 3, 3, 5, 6]):
            attn[row, n:], comp[row, n:] = 0, 0
    # the engine's log-probs are deliberately wrong: the module must not use them
    engine = torch.full((8, 6), -0.5) * comp
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 1.0, -1.0])
    return RolloutBatch(ids, attn, comp, engine * comp, adv, rows=[{}] * 8, stats={})


def fit(mini_batches: int, eps_high: float, epochs: int = 1, rollouts: int = 1, micro_tokens=None, ragged=False,
        plugins=None, precision="32-true"):
    rl = RLConf(mini_batches=mini_batches, epochs=epochs, micro_batch=3, lr=0.3, warmup_steps=1, grad_clip=1e9,
                temperature=0.7, max_new_tokens=4, micro_tokens=micro_tokens)
    seen = []
    hooks = Hooks(rollout=lambda step: synthetic_batch(ragged), on_step=lambda step, b, st: seen.append(st))
    module = RLModule(TinyPolicy(), get_algo("dapo", eps_high=eps_high), rl, hooks, identity={})
    grads = gradient_recorder()
    trainer = L.Trainer(max_steps=rollouts, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[grads], plugins=plugins,
                        **({} if plugins else {"precision": precision}))
    trainer.fit(module, train_dataloaders=_loader())
    return trainer, seen, grads.grads


def _loader():
    return torch.utils.data.DataLoader(list(range(100)), batch_size=1)


def test_eps_high_acts_on_the_second_minibatch_only_and_global_step_counts_rollouts():
    t_a, stats_a, grads_a = fit(2, eps_high=0.28)
    t_b, stats_b, grads_b = fit(2, eps_high=10.0)
    assert t_a.global_step == t_b.global_step == 1  # one rollout, two optimizer steps
    assert len(grads_a) == len(grads_b) == 2 and stats_a[0]["optimizer_steps"] == 2
    # the first mini-batch: old log-probs are the policy's own, the ratio is 1, the clip cannot act
    assert stats_a[0]["ratio_dev_first"] < 1e-5 and stats_a[0]["old_logprob_gap"] > 0.1
    assert torch.allclose(grads_a[0], grads_b[0])
    # the second: the policy has moved, the clip acts, and eps_high changes the gradient
    assert stats_a[0]["ratio_dev_max"] > 0.28 and stats_a[0]["clip_frac_high"] > 0
    assert not torch.allclose(grads_a[1], grads_b[1])
    assert stats_b[0]["clip_frac_high"] == 0


def test_one_minibatch_is_reinforce_the_clip_never_acts():
    trainer, stats, grads = fit(1, eps_high=0.28)
    assert trainer.global_step == 1 and len(grads) == 1
    assert stats[0]["ratio_dev_max"] < 1e-5
    assert stats[0]["clip_frac_low"] == stats[0]["clip_frac_high"] == 0


def test_epochs_multiply_optimizer_steps_not_rollouts():
    trainer, stats, grads = fit(2, eps_high=0.28, epochs=2, rollouts=2)
    assert trainer.global_step == 2 and len(stats) == 2 and len(grads) == 8
    assert all(s["optimizer_steps"] == 4 for s in stats)


def test_token_budget_micro_batches_give_the_same_update():
    # rows of 6, 3, 4, 6 | 3, 3, 5, 6 tokens in two mini-batches; a budget of 9 padded tokens cuts them
    # into [6], [3, 4], [6] | [3, 3], [5], [6]: six passes where micro_batch=3 makes four
    t_rows, by_rows, g_rows = fit(2, eps_high=0.28, ragged=True)
    t_tokens, by_tokens, g_tokens = fit(2, eps_high=0.28, ragged=True, micro_tokens=9)
    # the old log-probs over all 8 rows, then the two mini-batches; each pass cut to its longest row
    assert t_rows.lightning_module.model.widths == [6, 6, 6, 6, 6, 5, 6]  # [0:3] [3:6] [6:8] | [0:3] [3] | [4:7] [7]
    assert t_tokens.lightning_module.model.widths == [6, 4, 6, 3, 5, 6] * 2
    assert len(g_rows) == len(g_tokens) == 2
    for a, b in zip(g_rows, g_tokens):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    assert by_rows[0]["loss"] == pytest.approx(by_tokens[0]["loss"], rel=1e-5)
    assert by_rows[0]["ratio_dev_max"] > 0.05  # the second mini-batch moved: the comparison covers the clip


class CachedAutocast(MixedPrecision):
    """bf16-mixed as Lightning <= 2.5 ran it: autocast with its cast cache on (2.6 turns it off)."""

    def autocast_context_manager(self):
        return torch.autocast(self.device, dtype=torch.bfloat16, cache_enabled=True)


def test_a_cached_autocast_does_not_feed_later_minibatches_stale_weights():
    # Two optimizer steps inside one autocast context. With the cache on and never cleared, the second
    # mini-batch's forward reuses the bf16 copies of the weights from before the first step: its ratio
    # and gradient then differ from a run without the cache (measured: ratio_dev_max 0.43 against 2.83).
    _, plain, g_plain = fit(2, eps_high=0.28, precision="bf16-mixed")
    _, cached, g_cached = fit(2, eps_high=0.28, plugins=[CachedAutocast("bf16-mixed", "cpu")])
    assert plain[0]["ratio_dev_max"] > 0.5 and plain[0]["ratio_dev_first"] == 0
    assert cached[0]["ratio_dev_max"] == plain[0]["ratio_dev_max"]
    for a, b in zip(g_plain, g_cached):
        assert torch.equal(a, b)


def test_the_reference_model_is_used_on_the_policys_device_but_never_checkpointed(tmp_path):
    rl = RLConf(mini_batches=1, micro_batch=4, lr=0.3, warmup_steps=1, temperature=0.7, max_new_tokens=4)
    seen = []
    hooks = Hooks(rollout=lambda step: synthetic_batch(), on_step=lambda step, b, st: seen.append(st))
    ref = TinyPolicy()
    module = RLModule(TinyPolicy(), get_algo("grpo", kl_coef=0.5), rl, hooks, identity={}, ref_model=ref)
    trainer = L.Trainer(max_steps=1, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(module, train_dataloaders=_loader())
    assert len(ref.widths) == 2 and seen[0]["kl"] == 0  # it scored both micro-batches; same init: no KL yet
    trainer.save_checkpoint(tmp_path / "c.ckpt")
    state = torch.load(tmp_path / "c.ckpt", weights_only=False)["state_dict"]
    assert state and not any(k.startswith("ref_model") for k in state)
    assert all(k.startswith("model.") for k in state)
