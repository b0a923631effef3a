"""The memory-lean update (rl/logprobs.py): completion-only, chunked log-probs and entropy, and
activation checkpointing, give the full computation's losses and gradients. A real (random-init)
Qwen3 from transformers runs in float64, so the comparisons are exact to ~1e-12 on any CPU: the
lean path reorders no reduction that float64 could not absorb."""
import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen3Config

from chorus.config.schema import TrainerConf
from chorus.rl.logprobs import forward_logprobs, split
from chorus.rl.losses import clipped_pg_loss, k3_kl, sft_loss, token_logprobs
from chorus.trainer_setup import use_gradient_checkpointing

V = 4000  # the vocabulary dominates the hidden size, as Qwen3's 151,936 does its 2,560


def qwen(seed: int = 0):
    torch.manual_seed(seed)
    cfg = Qwen3Config(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                      head_dim=16, intermediate_size=64, tie_word_embeddings=True, max_position_embeddings=64,
                      attn_implementation="eager")
    return AutoModelForCausalLM.from_config(cfg).double()


def batch():
    """Three right-padded rows: prompts of 5, 3 and 6 tokens, completions of 7, 7 and 3."""
    ids = torch.randint(4, V, (3, 12), generator=torch.Generator().manual_seed(3))
    attn = torch.ones_like(ids)
    attn[2, 9:] = 0
    mask = torch.zeros(3, 12)
    mask[0, 5:12], mask[1, 3:10], mask[2, 6:9] = 1, 1, 1
    return ids, attn, mask


def full(model, ids, attn, mask, temperature):
    """The old path: logits over every position and the whole vocabulary, then token_logprobs."""
    logits = model(input_ids=ids, attention_mask=attn).logits
    logp, ent = token_logprobs(logits.double(), ids, temperature, with_entropy=True)
    return logits, logp.double() * mask, ent * mask


def grads(model) -> dict:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def assert_same_grads(a: dict, b: dict):
    assert a.keys() == b.keys() and len(a) > 10
    for n in a:
        torch.testing.assert_close(a[n], b[n], rtol=1e-9, atol=1e-12, msg=n)


@pytest.mark.parametrize("chunk", [1, 5, 10_000])
def test_completion_only_chunked_logprobs_and_entropy_equal_the_full_computation(chunk):
    model, (ids, attn, mask) = qwen(), batch()
    assert split(model) is not None  # the lean path itself, not its fallback
    _, logp_full, ent_full = full(model, ids, attn, mask, 0.7)
    f = forward_logprobs(model, ids, attn, mask, 0.7, chunk, with_entropy=True)
    assert f.logp.dtype == torch.float64 and f.hidden.shape == (17, 32)  # 7 + 7 + 3 positions, not 36 x vocab
    torch.testing.assert_close(f.logp, logp_full, rtol=0, atol=1e-12)
    torch.testing.assert_close(f.entropy, ent_full, rtol=0, atol=1e-12)
    assert not f.entropy.requires_grad and (f.logp[mask == 0] == 0).all()


def dapo_loss(logp, ref, old, mask):
    adv = torch.tensor([1.0, -0.5, 0.25], dtype=torch.float64)
    return clipped_pg_loss(logp, old, adv, mask, 0.2, 0.28, "token_mean", float(mask.sum()), None, ref, 0.05)[0]


def test_the_dapo_loss_with_kl_and_its_gradients_equal_the_full_computation():
    model, ref_model, (ids, attn, mask) = qwen(0), qwen(1), batch()
    old = (full(model, ids, attn, mask, 1.0)[1] + 0.05 * mask).detach()  # off-policy: the ratio moves and clips
    with torch.no_grad():
        ref_full = full(ref_model, ids, attn, mask, 1.0)[1]
        ref_lean = forward_logprobs(ref_model, ids, attn, mask).logp
    torch.testing.assert_close(ref_lean, ref_full, rtol=0, atol=1e-12)
    loss_full = dapo_loss(full(model, ids, attn, mask, 1.0)[1], ref_full, old, mask)
    loss_full.backward()
    g_full = grads(model)
    model.zero_grad(set_to_none=True)
    loss_lean = dapo_loss(forward_logprobs(model, ids, attn, mask, chunk=4).logp, ref_lean, old, mask)
    loss_lean.backward()
    assert loss_lean.item() == pytest.approx(loss_full.item(), rel=1e-12) and loss_full.item() != 0
    assert float((k3_kl(ref_lean, old) * mask).sum()) > 0  # the KL term contributes
    assert_same_grads(grads(model), g_full)


def test_the_sft_loss_from_labelled_positions_equals_cross_entropy_over_full_logits():
    model, (ids, attn, mask) = qwen(), batch()
    labels = torch.where(mask.bool(), ids, torch.full_like(ids, -100))
    logits = model(input_ids=ids, attention_mask=attn).logits
    want = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1), ignore_index=-100)
    want.backward()
    g_full = grads(model)
    model.zero_grad(set_to_none=True)
    got = sft_loss(forward_logprobs(model, ids, attn, labels != -100, chunk=2).logp, labels)
    got.backward()
    assert float(got) == pytest.approx(float(want), rel=1e-12)
    assert_same_grads(grads(model), g_full)


def test_activation_checkpointing_gives_the_same_gradients():
    (ids, attn, mask), results = batch(), []
    for checkpointing in (False, True):
        model = qwen()
        assert use_gradient_checkpointing(model, TrainerConf(gradient_checkpointing=checkpointing)) == checkpointing
        model.train()
        assert any(getattr(m, "gradient_checkpointing", False) for m in model.modules()) == checkpointing
        loss = -(forward_logprobs(model, ids, attn, mask, chunk=4).logp * torch.linspace(0, 1, 12)).sum()
        loss.backward()
        results.append((float(loss), grads(model)))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-12)
    assert_same_grads(results[0][1], results[1][1])


def largest_saved(model, fn) -> int:
    """The most elements of any activation (not a parameter) autograd keeps for the backward pass."""
    params = {p.data_ptr() for p in model.parameters()}
    sizes = [0]

    def pack(t):
        if t.data_ptr() not in params:
            sizes.append(t.numel())
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return max(sizes)


def test_no_logits_over_the_vocabulary_are_kept_for_backward():
    model, (ids, attn, mask) = qwen(), batch()
    kept_full = largest_saved(model, lambda: full(model, ids, attn, mask, 1.0))
    kept_lean = largest_saved(model, lambda: forward_logprobs(model, ids, attn, mask, chunk=4))
    assert kept_full >= 3 * 11 * V  # the log-softmax over every position: what the old path kept
    assert kept_lean < 17 * V / 4  # not even one chunk (4 x V): chunks are recomputed in backward


def test_a_model_whose_logits_are_not_its_head_of_its_body_takes_the_full_path():
    model, (ids, attn, mask) = qwen(), batch()
    other = torch.nn.Linear(32, V, bias=False).double()  # a head that is not the one forward uses
    model.get_output_embeddings = lambda: other
    with pytest.warns(UserWarning, match="does not reproduce its logits; computing full-vocabulary logits"):
        assert split(model) is None
    f = forward_logprobs(model, ids, attn, mask, 0.9, 3, with_entropy=True)  # said once per model: no warning
    _, logp_full, ent_full = full(model, ids, attn, mask, 0.9)
    torch.testing.assert_close(f.logp, logp_full, rtol=0, atol=1e-12)
    torch.testing.assert_close(f.entropy, ent_full, rtol=0, atol=1e-12)


@pytest.mark.parametrize("pack", [False, True])
def test_no_log_prob_forward_builds_a_kv_cache(pack):
    """Teachers, the reference and the old log-probs run in eval mode without gradients, where a
    transformers model keeps every layer's keys and values unless told not to (~9.7 GB at 4B, 8 x 8,192
    tokens). Every forward the lean path makes, the head-split check's included, asks for no cache."""
    model, (ids, attn, mask) = qwen(), batch()
    model.eval()
    asked = []
    for module in (model, model.get_decoder()):
        module.register_forward_pre_hook(lambda m, args, kwargs: asked.append(kwargs.get("use_cache")),
                                         with_kwargs=True)
    with torch.no_grad():
        f = forward_logprobs(model, ids, attn, mask, 1.0, pack=pack)
    assert asked and set(asked) == {False}  # the check's full and split forwards, then the lean body
    assert torch.isfinite(f.logp).all()
