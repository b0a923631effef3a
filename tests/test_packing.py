"""Packed update passes (rl/packing.py): a micro-batch's rows as one unpadded row give the padded
pass's log-probs, entropies, hidden features, losses and gradients. Real random-init transformers
models in float64 under sdpa (the project's default attention), whose packed pass differs from the
padded one only by the reduction order float64 absorbs (1e-10 asked; 0 seen on CPU)."""
import warnings

import lightning as L
import pytest
import torch
from transformers import AttentionInterface, AutoModelForCausalLM, CohereConfig, Qwen3Config
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from chorus.config.schema import RLConf
from chorus.rl.algos import get_algo
from chorus.rl.logprobs import forward_logprobs, split
from chorus.rl.losses import clipped_pg_loss, k3_kl, micro_slices
from chorus.rl.packing import (pack_rows, packed_tokens, padded_tokens, pass_tokens, row_lengths, should_pack,
                               why_not_packable)
from chorus.rl.module import Hooks, RLModule
from chorus.rl.rollouts import RolloutBatch
from helpers import gradient_recorder

V = 4000


def qwen(seed: int = 0, attn: str = "sdpa"):
    torch.manual_seed(seed)
    cfg = Qwen3Config(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                      head_dim=16, intermediate_size=64, tie_word_embeddings=True, max_position_embeddings=64,
                      attn_implementation=attn)
    return AutoModelForCausalLM.from_config(cfg).double()


def batch(seed: int = 3):
    """Four right-padded rows of 12, 10, 9 and 4 tokens: prompts of 5, 3, 6 and 2, completions of 7,
    7, 3 and 2."""
    ids = torch.randint(4, V, (4, 12), generator=torch.Generator().manual_seed(seed))
    attn = torch.zeros_like(ids)
    mask = torch.zeros(4, 12, dtype=torch.float64)
    for row, (prompt, length) in enumerate([(5, 12), (3, 10), (6, 9), (2, 4)]):
        attn[row, :length], mask[row, prompt:length] = 1, 1
    return ids, attn, mask


def body_inputs(model) -> list[tuple]:
    """The shape of input_ids (and whether an attention mask came) of each later call of the model's
    body, after the once-per-model checks (split's, the packing probe's) have run."""
    split(model), why_not_packable(model)
    seen = []
    model.model.register_forward_pre_hook(
        lambda mod, args, kw: seen.append((tuple(kw["input_ids"].shape), kw.get("attention_mask") is not None)),
        with_kwargs=True)
    return seen


def grads(model) -> dict:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_pack_rows_by_hand():
    ids = torch.tensor([[11, 12, 13, 0], [21, 22, 0, 0], [31, 32, 33, 34]])
    attn = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]])
    mask = torch.tensor([[0, 1, 1, 0], [1, 1, 0, 0], [1, 0, 1, 1]])  # first tokens wanted: nothing predicts them
    p = pack_rows(ids, attn, mask)
    assert p.ids.tolist() == [[11, 12, 13, 21, 22, 31, 32, 33, 34]]
    assert p.position_ids.tolist() == [[0, 1, 2, 0, 1, 0, 1, 2, 3]]
    # predicting 12, 13 | 22 | 33, 34; never a row's first token from the row before (13 -> 21, 22 -> 31)
    assert p.select.tolist() == [True, True, False, True, False, False, True, True]
    assert row_lengths(attn) == [3, 2, 4]
    assert row_lengths(torch.tensor([[0, 1, 1]])) is None  # left padding: not packable by lengths
    with pytest.raises(ValueError, match="right-padded.*trainer.pack_sequences=false"):
        pack_rows(ids[:1], torch.tensor([[0, 1, 1, 1]]), mask[:1])
    with pytest.raises(ValueError, match="padding"):
        pack_rows(ids[:1], attn[:1], torch.tensor([[0, 1, 1, 1]]))


@pytest.mark.parametrize("chunk", [3, 1024])
def test_packed_logprobs_entropy_and_features_equal_the_padded_pass(chunk):
    model, (ids, attn, mask) = qwen(), batch()
    mask[:, 0] = 1  # wanted first tokens (as SFT labels may mark them) are predicted by no position in either path
    seen = body_inputs(model)
    padded = forward_logprobs(model, ids, attn, mask, 0.7, chunk, with_entropy=True, pack=False)
    packed = forward_logprobs(model, ids, attn, mask, 0.7, chunk, with_entropy=True, pack=True)
    assert seen == [((4, 12), True), ((1, 35), False)]  # 12 + 10 + 9 + 4 tokens, not 4 x 12
    assert packed.hidden.shape == padded.hidden.shape == (19, 32)  # 7 + 7 + 3 + 2 completion tokens
    torch.testing.assert_close(packed.logp, padded.logp, rtol=0, atol=1e-10)
    torch.testing.assert_close(packed.entropy, padded.entropy, rtol=0, atol=1e-10)
    torch.testing.assert_close(packed.hidden, padded.hidden, rtol=0, atol=1e-10)  # what OPD's direct mode reads
    assert (packed.logp[mask == 0] == 0).all() and (packed.logp[:, 1:][mask[:, 1:] == 1] < 0).all()


def test_a_rows_logprobs_do_not_depend_on_the_other_rows_of_its_pack():
    model, (ids, attn, mask) = qwen(), batch()
    other_ids, other_attn, other_mask = ids.clone(), attn.clone(), mask.clone()
    other_ids[0] = torch.randint(4, V, (12,), generator=torch.Generator().manual_seed(9))  # new tokens,
    other_attn[0, 8:], other_mask[0, 8:] = 0, 0  # and 8 of them instead of 12: the later rows move in the pack
    seen = body_inputs(model)
    with torch.no_grad():
        a = forward_logprobs(model, ids, attn, mask, pack=True).logp
        b = forward_logprobs(model, other_ids, other_attn, other_mask, pack=True).logp
    assert seen == [((1, 35), False), ((1, 31), False)]
    torch.testing.assert_close(a[1:], b[1:], rtol=0, atol=1e-10)
    assert (a[0, 5:8] - b[0, 5:8]).abs().min() > 1e-3  # the changed row itself moved


def dapo_loss(logp, ref, old, mask):
    adv = torch.tensor([1.0, -0.5, 0.25, 2.0], dtype=torch.float64)
    return clipped_pg_loss(logp, old, adv, mask, 0.2, 0.28, "token_mean", float(mask.sum()), None, ref, 0.05)[0]


def test_a_dapo_micro_batch_loss_and_its_gradients_equal_under_both_paths():
    model, ref_model, (ids, attn, mask) = qwen(0), qwen(1), batch()
    results = []
    for pack in (False, True):
        with torch.no_grad():
            ref = forward_logprobs(ref_model, ids, attn, mask, pack=pack).logp
            old = forward_logprobs(model, ids, attn, mask, pack=pack).logp + 0.05 * mask  # off-policy: clips
        model.zero_grad(set_to_none=True)
        loss = dapo_loss(forward_logprobs(model, ids, attn, mask, chunk=4, pack=pack).logp, ref, old, mask)
        loss.backward()
        results.append((float(loss.detach()), grads(model), float((k3_kl(old, ref) * mask).sum())))
    (loss_pad, g_pad, kl_pad), (loss_pack, g_pack, kl_pack) = results
    assert loss_pack == pytest.approx(loss_pad, rel=1e-10) and loss_pad != 0
    assert kl_pack == pytest.approx(kl_pad, rel=1e-10) and kl_pad > 0  # the reference's term contributes
    assert g_pad.keys() == g_pack.keys() and len(g_pad) > 10
    for name in g_pad:
        torch.testing.assert_close(g_pack[name], g_pad[name], rtol=1e-9, atol=1e-12, msg=name)


def test_a_model_without_a_head_body_split_packs_through_its_full_logits():
    torch.manual_seed(0)
    cfg = CohereConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                       intermediate_size=64, max_position_embeddings=64, logit_scale=0.5, bos_token_id=1,
                       eos_token_id=2, pad_token_id=0, attn_implementation="sdpa")
    model, (ids, attn, mask) = AutoModelForCausalLM.from_config(cfg).double(), batch()
    with pytest.warns(UserWarning, match="full-vocabulary logits"):
        assert split(model) is None  # logit_scale: the fallback path
    padded = forward_logprobs(model, ids, attn, mask, 0.7, with_entropy=True, pack=False)
    packed = forward_logprobs(model, ids, attn, mask, 0.7, with_entropy=True, pack=True)
    torch.testing.assert_close(packed.logp, padded.logp, rtol=0, atol=1e-10)
    torch.testing.assert_close(packed.entropy, padded.entropy, rtol=0, atol=1e-10)


def causal_only(module, query, key, value, attention_mask, **kwargs):
    """An attention kernel that ignores its mask: rows packed together would attend to each other."""
    kwargs.pop("is_causal", None)
    return sdpa_attention_forward(module, query, key, value, None, is_causal=True, **kwargs)


def test_a_model_whose_attention_does_not_separate_packed_rows_is_refused_or_padded():
    AttentionInterface.register("chorus_test_causal_only", causal_only)
    model, (ids, attn, mask) = qwen(attn="chorus_test_causal_only"), batch()
    assert "does not separate packed rows" in why_not_packable(model)
    assert why_not_packable(qwen()) is None  # the same model under sdpa does
    with pytest.raises(ValueError, match="trainer.pack_sequences=true.*set trainer.pack_sequences=null or false"):
        forward_logprobs(model, ids, attn, mask, pack=True)
    seen = body_inputs(model)
    with pytest.warns(UserWarning, match="not packed"):
        forward_logprobs(model, ids, attn, mask, pack=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once per model
        forward_logprobs(model, ids, attn, mask, pack=None)
    assert seen == [((4, 12), True)] * 2  # padded passes


def test_null_packs_where_packing_computes_no_more_than_padding():
    sdpa = qwen()
    # sdpa scores all N^2 token pairs of a pack: 3,400^2 <= 8 x 2,000^2, but 3,200^2 > 8 x 400^2
    unequal, equal = [2000] + [200] * 7, [400] * 8
    assert should_pack(sdpa, unequal, None) and not should_pack(sdpa, equal, None)
    assert pass_tokens(sdpa, unequal, None) == 3400 and pass_tokens(sdpa, equal, None) == 3200  # packed; padded
    assert should_pack(sdpa, equal, True) and not should_pack(sdpa, unequal, False)
    assert not should_pack(sdpa, None, None)  # rows that are not right-padded stay padded
    assert padded_tokens(unequal) == 16000 and packed_tokens(unequal) == 3400


def test_token_budget_micro_batches_count_the_tokens_a_packed_pass_computes():
    lengths = [6, 3, 4, 6, 3, 3, 5, 6]
    # padded (rows x longest <= 9): [6] [3, 4] [6] [3, 3] [5] [6]; packed (sum <= 9): [6, 3] [4] [6, 3] [3, 5] [6]
    assert micro_slices(slice(0, 8), lengths, 1, 9) == [slice(0, 1), slice(1, 3), slice(3, 4), slice(4, 6),
                                                        slice(6, 7), slice(7, 8)]
    assert micro_slices(slice(0, 8), lengths, 1, 9, packed_tokens) == [slice(0, 2), slice(2, 3), slice(3, 5),
                                                                       slice(5, 7), slice(7, 8)]


def rollout() -> RolloutBatch:
    """Six right-padded rows of 12, 4, 10, 3, 9 and 5 tokens, prompts of 2 or 3."""
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(4, V, (6, 12), generator=g)
    attn, comp = torch.zeros_like(ids), torch.zeros_like(ids)
    for row, (prompt, length) in enumerate([(3, 12), (2, 4), (3, 10), (2, 3), (3, 9), (2, 5)]):
        attn[row, :length], comp[row, prompt:length] = 1, 1
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 1.5, -1.5])
    return RolloutBatch(ids, attn, comp, torch.full((6, 12), -0.5) * comp, adv, rows=[{}] * 6, stats={})


@pytest.mark.slow
def test_the_rl_update_packed_equals_the_padded_one_with_micro_batches_sized_by_computed_tokens():
    runs = {}
    for pack in (False, True):
        model, seen, grads = qwen(), [], gradient_recorder()
        rl = RLConf(mini_batches=2, micro_batch=8, micro_tokens=20, lr=0.05, warmup_steps=1, grad_clip=1e9,
                    temperature=0.7, max_new_tokens=10)
        hooks = Hooks(rollout=lambda step: rollout(), on_step=lambda step, b, st: seen.append(st))
        module = RLModule(model, get_algo("dapo"), rl, hooks, identity={}, pack_sequences=pack)
        passes = body_inputs(model)
        trainer = L.Trainer(max_steps=1, accelerator="cpu", devices=1, precision="64-true", logger=False,
                            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                            callbacks=[grads])
        trainer.fit(module, train_dataloaders=torch.utils.data.DataLoader(list(range(4)), batch_size=1))
        runs[pack] = seen[0], grads.grads, [shape for shape, _ in passes]
    (padded, g_padded, s_padded), (packed, g_packed, s_packed) = runs[False], runs[True]
    # a budget of 20 tokens: padded, rows x longest: old log-probs [12] [4, 10] [3, 9] [5], then mini-batches
    # [12] [4, 10] | [3, 9] [5]; packed, the rows' own: [12, 4] [10, 3] [9, 5], then [12, 4] [10] | [3, 9, 5]
    assert s_padded == [(1, 12), (2, 10), (2, 9), (1, 5), (1, 12), (2, 10), (2, 9), (1, 5)]
    assert s_packed == [(1, 16), (1, 13), (1, 14), (1, 16), (1, 10), (1, 17)]
    assert len(g_padded) == len(g_packed) == 2 and padded["optimizer_steps"] == 2
    for a, b in zip(g_padded, g_packed):  # the second step's gradient: after the first step moved the policy
        torch.testing.assert_close(b, a, rtol=1e-9, atol=1e-12)
    assert packed["loss"] == pytest.approx(padded["loss"], rel=1e-9) and padded["ratio_dev_max"] > 1e-3
    assert packed["entropy"] == pytest.approx(padded["entropy"], rel=1e-9)
