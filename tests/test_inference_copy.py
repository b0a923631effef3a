"""The inference copy (rl.inference_copy): a model.dtype copy of the policy that the hf engine samples
from, refreshed in place after each update. When auto turns it on (a pure function), that a refresh
makes it exactly the policy cast to its dtype without reallocating, that generation and the run's
rollouts and evaluations go through it, and that its samples get truncated importance weights."""
import copy
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen3Config

from chorus.config.schema import RLConf, TrainerConf
from chorus.policy.engines import SamplingParams, make_engine
from chorus.policy.inference_copy import InferenceCopy, use_inference_copy
from chorus.policy.models import add_lora, load_model
from chorus.rl import loop as rl_loop
from chorus.rl import run as rl_run
from chorus.rl.algos import get_algo
from chorus.rl.losses import tis_weights
from chorus.rl.module import Hooks, RLModule
from chorus.rl.rollouts import collect
from chorus.rl.run import Objective, inference_copy, train_rl
from helpers import context, rl_settings, weights

CUDA, CPU = torch.device("cuda", 0), torch.device("cpu")


@pytest.mark.parametrize("setting, engine, device, precision, dtype, expected", [
    ("auto", "hf", CUDA, "bf16-mixed", "bfloat16", True),  # trainer=gpu model.dtype=bfloat16
    ("auto", "hf", CUDA, "16-mixed", "float16", True),
    ("auto", "hf", CPU, "32-true", "bfloat16", False),  # the CPU: the masters sample, no autocast
    ("auto", "hf", CUDA, "bf16-mixed", "float32", False),  # a float32 copy would be the masters again
    ("auto", "hf", CUDA, "bf16-true", "bfloat16", False),  # the trained weights are bf16 already
    ("auto", "hf", CUDA, "32-true", "bfloat16", False),
    ("auto", "vllm", CUDA, "bf16-mixed", "bfloat16", False),  # vLLM holds its own copy
    ("on", "hf", CPU, "32-true", "float32", True),
    ("off", "hf", CUDA, "bf16-mixed", "bfloat16", False),
])
def test_when_the_copy_is_on(setting, engine, device, precision, dtype, expected):
    assert use_inference_copy(setting, engine=engine, device=device, precision=precision,
                              model_dtype=dtype) is expected


def test_bad_combinations_name_the_fix():
    with pytest.raises(ValueError, match="rl.inference_copy=on is for rl.engine=hf"):
        use_inference_copy("on", engine="vllm", device=CUDA, precision="bf16-mixed", model_dtype="bfloat16")
    with pytest.raises(ValueError, match="choose auto, on or off"):
        use_inference_copy("yes", engine="hf", device=CPU, precision="32-true", model_dtype="float32")
    # the run's own reading: the defaults on this CPU trainer keep it off
    assert inference_copy(RLConf(), TrainerConf(), "bfloat16") is False
    assert inference_copy(RLConf(inference_copy="on"), TrainerConf(), "float32") is True


def qwen(tie: bool = True):
    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, head_dim=16, intermediate_size=64, tie_word_embeddings=tie,
                      max_position_embeddings=64)
    return AutoModelForCausalLM.from_config(cfg)


def one_update(policy) -> None:
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-2)
    ids = torch.randint(0, 300, (2, 9), generator=torch.Generator().manual_seed(1))
    policy(input_ids=ids, labels=ids).loss.backward()
    opt.step()


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_a_refresh_makes_the_copy_the_policy_cast_in_place(dtype):
    policy = qwen()
    inf = InferenceCopy(policy, dtype)
    params = dict(inf.model.named_parameters())
    assert params.keys() == dict(policy.named_parameters()).keys()
    assert all(p.dtype == dtype and not p.requires_grad for p in params.values())
    # tied embeddings stay one tensor, counted once: 2 (or 8) bytes per parameter
    assert inf.model.lm_head.weight is inf.model.model.embed_tokens.weight
    assert inf.nbytes() == sum(p.numel() for p in policy.parameters()) * torch.finfo(dtype).bits // 8
    ptrs = {k: p.data_ptr() for k, p in params.items()}
    before = {k: p.detach().clone() for k, p in policy.named_parameters()}

    one_update(policy)
    moved = [k for k, p in policy.named_parameters() if not torch.equal(p, before[k])]
    assert moved and all(torch.equal(params[k], before[k].to(dtype)) for k in moved)  # not refreshed yet
    inf.refresh(policy)
    for k, p in policy.named_parameters():
        assert torch.equal(params[k], p.detach().to(dtype)), k  # exactly the cast policy
    assert {k: p.data_ptr() for k, p in inf.model.named_parameters()} == ptrs  # the same tensors, refilled
    params["model.norm.weight"].data.add_(1.0)  # and the copy's tensors are its own
    assert not torch.equal(dict(policy.named_parameters())["model.norm.weight"].to(dtype), params["model.norm.weight"])


def test_under_lora_the_copy_holds_the_merged_weights():
    """A plain model (no adapter modules) whose adapted layers are, after each refresh, exactly peft's
    own merge of the updated adapter (merge_and_unload of a deep copy, in float32), cast to float64."""
    policy = add_lora(qwen(tie=False), r=4, alpha=8)
    inf = InferenceCopy(policy, torch.float64)
    assert not any("lora" in name for name, _ in inf.model.named_modules())
    one_update(policy)  # lora_B leaves zero: the merged weights move
    inf.refresh(policy)
    merged = copy.deepcopy(policy).merge_and_unload()
    mine = dict(inf.model.named_parameters())
    assert mine.keys() == dict(merged.named_parameters()).keys()
    for name, p in merged.named_parameters():
        assert torch.equal(mine[name], p.detach().to(torch.float64)), name
    start = dict(qwen(tie=False).named_parameters())["model.layers.0.self_attn.q_proj.weight"]
    assert not torch.equal(mine["model.layers.0.self_attn.q_proj.weight"], start.double())


def test_the_engine_over_the_copy_generates_the_updated_policy_in_its_dtype(tiny_xs, tmp_path):
    """An engine built on the copy before an update samples the update's weights after the refresh: its
    greedy tokens and their log-probs are those of the updated policy saved and loaded in bf16, as an
    evaluation loads a checkpoint (rotary frequencies stay float32 in both)."""
    policy, tok = load_model("hf", path=str(tiny_xs), dtype="float32")
    inf = InferenceCopy(policy, torch.bfloat16)
    engine = make_engine("hf", inf.model, tok, generation="plain")
    with torch.no_grad():
        for p in policy.parameters():  # a large change, so that the greedy tokens change
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())) * 0.5)
    inf.refresh(policy)
    greedy = SamplingParams(max_new_tokens=12, temperature=0.0)
    [[g]] = engine.generate(["module counter"], 1, greedy)
    policy.save_pretrained(tmp_path / "updated")
    tok.save_pretrained(tmp_path / "updated")
    reference, _ = load_model("hf", path=str(tmp_path / "updated"), dtype="bfloat16")
    [[r]] = make_engine("hf", reference, tok, generation="plain").generate(["module counter"], 1, greedy)
    [[masters]] = make_engine("hf", policy, tok, generation="plain").generate(["module counter"], 1, greedy)
    assert g.token_ids == r.token_ids and len(g.token_ids) > 0
    assert g.logprobs == r.logprobs and g.logprobs != masters.logprobs  # bf16's numbers, not the masters'


def test_samples_from_a_separate_sampler_get_truncated_importance_weights():
    """rl.tis_cap applies whenever another set of weights sampled (hooks.sync_weights: vLLM or the
    inference copy), never when the hf engine sampled the trained policy itself."""
    old = torch.tensor([[0.0, -1.0, -2.0, -0.5]])
    sampled = torch.tensor([[0.0, -1.5, -1.0, -0.5]])
    mask = torch.tensor([[0.0, 1.0, 1.0, 1.0]])
    b = SimpleNamespace(old_logprobs=old, engine_logprobs=sampled)
    rl = RLConf(tis_cap=1.5)
    with_copy = RLModule(qwen(), get_algo("dapo"), rl, Hooks(rollout=lambda s: None, sync_weights=lambda m: None), {})
    torch.testing.assert_close(with_copy._tis(b, slice(0, 1), mask),
                               torch.tensor([[0.0, 1.5, torch.e ** -1, 1.0]]))  # exp(0.5) capped, exp(-1), 1
    torch.testing.assert_close(with_copy._tis(b, slice(0, 1), mask), tis_weights(old, sampled, mask, 1.5))
    itself = RLModule(qwen(), get_algo("dapo"), rl, Hooks(rollout=lambda s: None), {})
    assert itself._tis(b, slice(0, 1), mask) is None


@pytest.mark.slow
def test_rollouts_and_evaluations_sample_the_refreshed_copy(sft_xs, rl_tasks, eval_tasks, sim, tmp_path,
                                                            monkeypatch):
    """rl.inference_copy=on with model.dtype=bfloat16 on the CPU: every rollout and held-out evaluation
    samples one bf16 model that is not the trained policy; the second rollout's is the step-1 snapshot's
    weights in bf16, the final evaluation's the exported policy's."""
    seen = []

    def spy(kind, engine):
        seen.append((kind, engine.model, {k: p.detach().clone() for k, p in engine.model.named_parameters()}))

    def collect_spy(draw, engine, *a, **k):
        spy("rollout", engine)
        return collect(draw, engine, *a, **k)

    real_evaluate = rl_run.evaluate_policy

    def evaluate_spy(engine, *a, **k):
        spy("eval", engine)
        return real_evaluate(engine, *a, **k)
    for module in (rl_run, rl_loop):  # the final evaluation (rl/run.py) and the periodic ones (rl/loop.py)
        monkeypatch.setattr(module, "evaluate_policy", evaluate_spy)
    ctx = context(tmp_path, sim, dtype="bfloat16")
    train_rl(str(sft_xs), get_algo("dapo", overlong_buffer=32), rl_tasks, eval_tasks[:1], ctx,
             rl=rl_settings(inference_copy="on", eval_every=1, steps=2), objective=Objective(collect=collect_spy))

    assert [s[0] for s in seen] == ["rollout", "eval", "rollout", "eval"]  # step 1's periodic, the final
    (sampler,) = {id(s[1]) for s in seen}  # one copy throughout, refilled in place
    assert all(p.dtype == torch.bfloat16 and not p.requires_grad for p in seen[0][1].parameters())
    step1 = torch.load(tmp_path / "ckpt/weights-step=1.ckpt", weights_only=False)["state_dict"]
    final = weights(tmp_path / "hf")
    for name, w in seen[2][2].items():  # the second rollout samples the policy after update 1 (periodic eval too)
        assert torch.equal(w, step1[f"model.{name}"].to(torch.bfloat16)), name
        assert torch.equal(seen[1][2][name], w)
    for name, w in seen[3][2].items():
        key = name if name in final else "model.embed_tokens.weight"  # lm_head is tied to the embeddings
        assert torch.equal(w, final[key].to(torch.bfloat16)), name
    assert any(not torch.equal(seen[0][2][k], seen[2][2][k]) for k in seen[0][2])  # the update reached it


@pytest.mark.slow
def test_under_lora_a_run_samples_and_evaluates_the_merged_copy(sft_xs, rl_tasks, sim, tmp_path, monkeypatch):
    """rl.inference_copy=on with a LoRA adapter (float32 copy, so exact): the final evaluation samples a
    plain model equal to the exported policy, which export_merged merges with peft."""
    seen = {}
    real_evaluate = rl_run.evaluate_policy

    def evaluate_spy(engine, *a, **k):
        seen.update({k2: p.detach().clone() for k2, p in engine.model.named_parameters()})
        seen["_lora_modules"] = [n for n, _ in engine.model.named_modules() if "lora" in n]
        return real_evaluate(engine, *a, **k)
    monkeypatch.setattr(rl_run, "evaluate_policy", evaluate_spy)
    from chorus.config.schema import LoraConf

    train_rl(str(sft_xs), get_algo("dapo", overlong_buffer=32), rl_tasks, [], context(tmp_path, sim),
             rl=rl_settings(inference_copy="on", steps=1, lora=LoraConf(r=4, alpha=8)))
    assert seen.pop("_lora_modules") == []
    final = weights(tmp_path / "hf")
    for name, w in seen.items():
        key = name if name in final else "model.embed_tokens.weight"  # lm_head tied to the embeddings
        assert torch.equal(w, final[key]), name
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(final[q], weights(sft_xs)[q])  # the adapter moved the merged weights
