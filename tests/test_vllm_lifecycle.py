"""RL with engine=vllm through the real run path, on a stand-in for vLLM's LLM that really generates
(tests/vllm_standin.py): the engine is built at train start, takes the weights training starts from
(the restored ones on a resume) before its first rollout, sleeps through each update and is woken by
the weight sync, gets max_model_len and sleep mode, and its completions stop by the HF engine's fence
rule. Under 2 gloo ranks: tests/test_ddp.py."""
import json

import pytest
import torch

import vllm_standin
from chorus.config.schema import RLConf
from chorus.policy.engines import Generation
from chorus.policy.vllm_engine import VLLMEngine, fence_cut, finish_reason, llm_kwargs, sampling_kwargs
from chorus.rl.algos import get_algo
from chorus.rl.losses import clipped_pg_loss, tis_weights
from chorus.rl.module import RLModule
from chorus.rl.run import Objective, train_rl
from helpers import PROMPT, context, lines, rl_settings, weights


def run(init, out, rl_tasks, sim, objective=Objective(), **over):
    ctx = context(out, sim)
    rl = rl_settings(engine="vllm", max_new_tokens=24, prompts_per_step=1, group_size=2, **over)
    return train_rl(str(init), get_algo("dapo", dynamic_sampling=False), rl_tasks, rl_tasks[:1], ctx, rl=rl,
                    objective=objective)


@pytest.mark.slow
def test_the_engine_starts_from_the_trained_weights_sleeps_through_updates_and_resumes_synced(
        sft_xs, rl_tasks, sim, tmp_path, monkeypatch):
    vllm_standin.install(monkeypatch)
    vllm_standin.BUILT.clear()
    modules, grads_at_wake = [], []
    monkeypatch.setattr(vllm_standin.StandInLLM, "on_wake", staticmethod(lambda tags: grads_at_wake.append(
        (tags, [p.grad for p in modules[0].model.parameters()]))))
    run(sft_xs, tmp_path, rl_tasks, sim, steps=1,
        objective=Objective(module=lambda *a, **kw: modules.append(RLModule(*a, **kw)) or modules[-1]))
    [llm] = vllm_standin.BUILT
    # built at train start, synced before its first rollout; each rollout then sleeps, each update's
    # sync wakes its weights, reloads, resets the prefix cache and then wakes its KV cache; the final
    # evaluation samples from the last weights
    assert llm.calls[:3] == ["load", "reset", "generate"]
    per_step = ["sleep1", "wake:weights", "load", "reset", "wake:kv_cache"]
    # the update's gradients were freed before the wake (RLModule's sync_engine)
    assert [t for t, _ in grads_at_wake] == [["weights"], ["kv_cache"]]
    assert all(g is None for g in grads_at_wake[0][1])
    gens = [i for i, c in enumerate(llm.calls) if c == "generate"]
    assert [c for c in llm.calls if c != "generate"] == ["load", "reset", *per_step]
    assert gens[-1] > len(llm.calls) - 1 - llm.calls[::-1].index("reset")  # the final evaluation after the last sync
    kw = llm.kwargs
    assert kw["max_model_len"] == PROMPT + 24 and kw["enable_sleep_mode"] is True
    assert "distributed_executor_backend" not in kw and llm.world_at_build is None  # one process: vLLM's own
    trained = weights(tmp_path / "hf")
    assert all(torch.equal(llm.weights()[k], trained[k]) for k in trained)  # the engine holds the trained weights
    steps = lines(tmp_path / "steps.jsonl")
    assert all(s["old_logprob_gap"] < 1e-3 for s in steps)  # same model, same numerics: TIS weights ~1

    # a resume: the new engine's first load is the checkpoint's weights, not the init's. Whether one
    # step moved them depends on the rewards; so the checkpoint is moved by hand, by construction.
    ckpt = tmp_path / "ckpt/last.ckpt"
    saved = torch.load(ckpt, weights_only=False)
    saved["state_dict"] = {k: v + 0.01 if v.is_floating_point() else v for k, v in saved["state_dict"].items()}
    torch.save(saved, ckpt)
    vllm_standin.BUILT.clear()
    first_load = {}
    original = vllm_standin.StandInLLM.collective_rpc

    def record_first(self, *a, **k):
        out = original(self, *a, **k)
        first_load.setdefault("w", self.weights())
        return out
    monkeypatch.setattr(vllm_standin.StandInLLM, "collective_rpc", record_first)
    info = run(sft_xs, tmp_path, rl_tasks, sim, steps=2)
    assert info["resumed_from"].endswith("last.ckpt")
    restored = {k.removeprefix("model."): v for k, v in saved["state_dict"].items()}
    assert all(torch.equal(first_load["w"][k], restored[k]) for k in first_load["w"])


def test_vllm_arguments_bound_the_sequence_and_join_an_existing_process_group():
    kw = llm_kwargs("m", "bfloat16", 3, 0.3, max_model_len=8192, max_num_seqs=64, distributed=True, sleep=True)
    assert (kw["max_model_len"], kw["max_num_seqs"], kw["distributed_executor_backend"], kw["enable_sleep_mode"],
            kw["tensor_parallel_size"]) == (8192, 64, "external_launcher", True, 1)
    from chorus.policy.engines import SamplingParams

    assert "stop" not in sampling_kwargs(2, SamplingParams())  # the fence rule is applied afterwards


def test_hf_and_vllm_stop_at_every_eos_id_the_generation_config_lists(tiny_xs, tmp_path, monkeypatch):
    """A checkpoint whose generation config lists an EOS id its tokenizer does not name (Qwen3 lists
    <|endoftext|> beside <|im_end|>): the HF engine and the vLLM engine (its stand-in, which stops as
    vLLM does at the ids it is given) end at it, at the same token, with the same finish reason."""
    import shutil

    from transformers import GenerationConfig

    from chorus.policy.engines import HFEngine, SamplingParams
    from chorus.policy.models import load_model

    model, tok = load_model("hf", path=str(tiny_xs))
    prompt = ["<|im_start|>user\nmodule and2(input a, b, output y);<|im_end|>\n<|im_start|>assistant\n"]
    greedy = SamplingParams(max_new_tokens=24, temperature=1.0, seed=3)  # seeded: both engines draw alike
    free = HFEngine(model, tok, generation="plain").generate(prompt, 1, greedy)[0][0].token_ids
    # the first token drawn for the first time after the first step: made an EOS id below
    k = next(k for k in range(1, len(free)) if free[k] not in free[:k])
    shutil.copytree(tiny_xs, tmp_path / "ckpt")
    config = GenerationConfig.from_pretrained(tmp_path / "ckpt")
    config.eos_token_id = [*config.eos_token_id, free[k]]
    config.save_pretrained(tmp_path / "ckpt")
    model, tok = load_model("hf", path=str(tmp_path / "ckpt"))
    assert free[k] not in (tok.eos_token_id,)  # the tokenizer names another one
    hf = HFEngine(model, tok, generation="plain").generate(prompt, 1, greedy)[0][0]
    vllm_standin.install(monkeypatch)
    engine = VLLMEngine.open(str(tmp_path / "ckpt"), tok, dtype="float32", seed=0, generation=Generation)
    vl = engine.generate(prompt, 1, greedy)[0][0]
    assert hf.token_ids == vl.token_ids == free[:k + 1]
    assert hf.finish_reason == vl.finish_reason == "eos"
    assert free[k] in engine.stops  # given to vLLM as stop_token_ids


def test_the_fence_cut_is_the_hf_engines_rule(tiny_xs):
    from chorus.policy.models import load_model

    tok = load_model("hf", path=str(tiny_xs))[1]
    ids = lambda text: tok(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    # an untagged opening fence on its own line is not a close (vLLM's old stop string "\n```\n" cut here)
    opened = ids("note\n```\nx = 1\n")
    assert fence_cut(tok, opened) is None
    closed = ids("note\n```\nx = 1\n```\nmore text")
    cut = fence_cut(tok, closed)
    assert tok.decode(closed[:cut]).rstrip().endswith("x = 1\n```") and cut < len(closed)
    assert finish_reason("length", True) == "stop" and finish_reason("length", False) == "length"
    assert finish_reason("stop", False) == "eos"


def test_generate_cuts_at_the_fence_and_keeps_only_the_kept_tokens_logprobs(tiny_xs):
    from types import SimpleNamespace

    from chorus.policy.engines import SamplingParams
    from chorus.policy.models import load_model

    tok = load_model("hf", path=str(tiny_xs))[1]
    toks = tok("```sv\nx\n```\ntrailing words", add_special_tokens=False)["input_ids"]
    out = SimpleNamespace(outputs=[SimpleNamespace(text=tok.decode(toks), token_ids=toks, finish_reason="length",
                                                   stop_reason=None,
                                                   logprobs=[{t: SimpleNamespace(logprob=-0.1 * i)}
                                                             for i, t in enumerate(toks)])])

    class LLM:
        def generate(self, requests, params, use_tqdm=True):
            return [out]
    [[g]] = VLLMEngine(LLM(), tok, dict, Generation).generate(["p"], 1, SamplingParams())
    n = fence_cut(tok, toks)
    assert g.finish_reason == "stop" and g.token_ids == toks[:n] and g.logprobs == [-0.1 * i for i in range(n)]
    assert g.text.endswith("```") and "trailing" not in g.text


def test_truncated_importance_weights_hand_computed():
    trainer = torch.tensor([[0.0, -1.0, -2.0, -0.5]])
    engine = torch.tensor([[0.0, -1.5, -1.0, -0.5]])
    mask = torch.tensor([[0.0, 1.0, 1.0, 1.0]])
    w = tis_weights(trainer, engine, mask, cap=1.5)
    # exp(0.5) = 1.65 capped at 1.5; exp(-1) = 0.37; exp(0) = 1; off the mask 0
    torch.testing.assert_close(w, torch.tensor([[0.0, 1.5, torch.e ** -1, 1.0]]))
    logp = torch.tensor([[0.0, -1.0, -2.0, -0.5]], requires_grad=True)
    loss, _ = clipped_pg_loss(logp, logp.detach(), torch.tensor([2.0]), mask, normalizer=3.0, is_weights=w)
    loss.backward()
    # ratio 1, unclipped: d(-ratio * A * w / 3) / dlogp = -A * w / 3 per token
    torch.testing.assert_close(logp.grad, -2.0 * w / 3.0)
    with pytest.raises(ValueError, match="tis_cap"):
        tis_weights(trainer, engine, mask, cap=0.0)
    assert RLConf().tis_cap == 2.0


def test_the_sync_after_an_update_frees_the_gradients_then_wakes_weights_loads_resets_and_wakes_the_kv_cache(
        tiny_xs, monkeypatch):
    from chorus.policy.models import load_model
    from chorus.rl.module import sync_engine
    from chorus.rl.run import weight_sync

    llm = vllm_standin.StandInLLM(model=str(tiny_xs))
    trainer, tok = load_model("hf", path=str(tiny_xs), dtype="float32")
    engine = VLLMEngine(llm, tok, dict, Generation)
    opt = torch.optim.AdamW(trainer.parameters(), lr=1e-2)
    ids = tok("module and2(input a, b, output y);", return_tensors="pt")["input_ids"]
    trainer(input_ids=ids, labels=ids).loss.backward()
    opt.step()  # an update: its gradients are still allocated, as after RLModule._update
    assert all(p.grad is not None for p in trainer.parameters())
    engine.sleep()
    grads_at_wake = {}
    monkeypatch.setattr(vllm_standin.StandInLLM, "on_wake", staticmethod(
        lambda tags: grads_at_wake.setdefault(tuple(tags), [p.grad for p in trainer.parameters()])))
    zero_grad = opt.zero_grad
    monkeypatch.setattr(opt, "zero_grad", lambda **kw: (llm.calls.append("free grads"), zero_grad(**kw)))
    # the same calls on every device (empty_cache does nothing where CUDA never started); recorded here
    # to see where it falls
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: llm.calls.append("empty cache"))
    sync_engine(opt, trainer, weight_sync(engine))
    assert llm.calls == ["sleep1", "free grads", "empty cache", "wake:weights", "load", "reset", "wake:kv_cache"]
    assert all(g is None for g in grads_at_wake[("weights",)])  # the update's gradients were gone before the wake
    assert not engine.asleep and not llm.sleeping
    trained = trainer.state_dict()
    assert all(torch.equal(v, trained[k]) for k, v in llm.weights().items())
    awake = len(llm.calls)
    sync_engine(opt, trainer, weight_sync(engine))  # rl.vllm_sleep=false: nothing to wake
    assert llm.calls[awake:] == ["free grads", "empty cache", "load", "reset"]


def test_the_lora_delta_is_merged_in_fp32_under_the_training_steps_bf16_autocast(tiny_xs):
    """The sync and the inference copy's refresh run inside the training step's autocast; the merged
    weight is base + B A x scale computed in fp32 all the same (bf16 would round the delta to ~3
    significant digits: an error 1e3 times fp32's)."""
    from chorus.policy.inference_copy import InferenceCopy
    from chorus.policy.models import load_model, lora_merged_weight, merged_lora_weights

    model, _ = load_model("hf", path=str(tiny_xs), dtype="float32", lora={"r": 4, "alpha": 8, "dropout": 0.0,
                                                                         "target_modules": None})
    # made while the adapter is still a no-op (lora_B = 0): what the copy holds below is the refresh's merge
    inference_copy = InferenceCopy(model, torch.float32)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.normal_(0, 0.3)
    layer = model.get_base_model().model.layers[0].self_attn.q_proj
    a, b = layer.lora_A["default"].weight.double(), layer.lora_B["default"].weight.double()
    exact = layer.get_base_layer().weight.double() + b @ a * layer.scaling["default"]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        merged = lora_merged_weight(layer)
        synced = dict(merged_lora_weights(model))["model.layers.0.self_attn.q_proj.weight"]
        inference_copy.refresh(model)
    copied = inference_copy.model.model.layers[0].self_attn.q_proj.weight.detach()
    for w in (merged, synced, copied):
        assert w.dtype == torch.float32
        assert float((w.double() - exact).abs().max()) < 1e-6 * float(exact.abs().max())


@pytest.mark.parametrize("base_dtype", ["float32", "bfloat16"])
def test_a_lora_sync_pushes_the_merged_weights_under_the_base_names_and_leaves_the_adapter_unmerged(
        tiny_xs, base_dtype):
    import copy

    from chorus.policy.engines import HFEngine, SamplingParams
    from chorus.policy.models import load_model
    from chorus.rl.run import weight_sync

    policy, tok = load_model("hf", path=str(tiny_xs), dtype=base_dtype, lora={"r": 4, "alpha": 8})
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # lora_B starts at zero (a no-op adapter): give it a trained-looking value
        for name, p in policy.named_parameters():
            if "lora_" in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    assert {p.dtype for n, p in policy.named_parameters() if "lora_" in n} == {torch.float32}  # peft's adapter
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    # peft's own merge, on an fp32 copy: the independent value (the sync merges in fp32 over any base; the
    # engine rounds once, to its own dtype)
    merged = copy.deepcopy(policy).float().merge_and_unload()
    expected = merged.state_dict()
    llm = vllm_standin.StandInLLM(model=str(tiny_xs))
    engine = VLLMEngine(llm, tok, dict, Generation)
    engine.sleep()
    weight_sync(engine)(policy)
    names = llm.loaded_names
    assert sorted(names) == sorted(expected)  # the base model's Hugging Face names, every one of them
    assert not [n for n in names if "base_model" in n or "base_layer" in n or "lora_" in n]
    held = llm.weights()
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(expected[q], before[f"base_model.model.{q}".replace(".weight", ".base_layer.weight")])
    for name, value in expected.items():  # the engine's fp32 copy holds exactly peft's merged values
        assert torch.equal(held[name], value.float()), name
    after = policy.state_dict()  # the trainer's model is untouched: base and adapter, bit for bit
    assert sorted(after) == sorted(before) and all(torch.equal(after[k], before[k]) for k in before)
    assert not any(getattr(m, "merged", False) for m in policy.modules())
    # generation comes from the merged weights: the same tokens as peft's merged model, same sampling
    params = SamplingParams(max_new_tokens=12, temperature=1.0, seed=3)
    [[ours]] = engine.generate(["module and2"], 1, params)
    [[peft_merged]] = HFEngine(merged.float(), tok, generation="plain").generate(["module and2"], n=1, params=params)
    assert ours.token_ids == peft_merged.token_ids and len(ours.token_ids) > 0


@pytest.mark.slow
def test_rl_with_lora_on_vllm_trains_the_adapter_and_the_engine_serves_the_merged_model(
        sft_xs, rl_tasks, sim, tmp_path, monkeypatch):
    from chorus.config.schema import LoraConf

    vllm_standin.install(monkeypatch)
    vllm_standin.BUILT.clear()
    run(sft_xs, tmp_path, rl_tasks, sim, steps=1, lora=LoraConf(r=4, alpha=8))
    [llm] = vllm_standin.BUILT
    assert [c for c in llm.calls if c != "generate"] == ["load", "reset", "sleep1", "wake:weights", "load", "reset",
                                                         "wake:kv_cache"]
    assert not [n for n in llm.loaded_names if "lora_" in n or "base_layer" in n or n.startswith("base_model")]
    # the engine holds what export_merged (peft's merge_and_unload) wrote: the trained adapter merged.
    # Whether one step moved the adapter depends on the rewards; the merge itself is checked on a
    # nonzero adapter by test_a_lora_sync_pushes_the_merged_weights_...
    exported = weights(tmp_path / "hf")
    held = llm.weights()
    assert all(torch.equal(held[k], exported[k]) for k in exported)


def test_lora_runs_on_vllm_but_not_under_fsdp():
    from chorus.config.schema import LoraConf, TrainerConf
    from chorus.rl.run import check_run

    lora = RLConf(engine="vllm", lora=LoraConf(r=4))
    check_run(get_algo("dapo"), lora, TrainerConf(strategy="ddp"))  # merged into the engine at each sync
    with pytest.raises(ValueError, match="trainer=fsdp with LoRA is not supported.*use trainer=ddp with LoRA"):
        check_run(get_algo("dapo"), lora, TrainerConf(strategy="fsdp"))


@pytest.mark.slow
def test_lora_trains_an_fp32_adapter_on_a_base_in_model_dtype_and_exports_the_fp32_merge(
        tiny_xs, rl_tasks, sim, tmp_path):
    from chorus.config.schema import LoraConf

    seen = {}

    def after_step(step, stats):  # the policy as the update left it
        model = modules[0].model
        seen["dtypes"] = {("lora_" in n, p.requires_grad, p.dtype) for n, p in model.named_parameters()}
        seen["state"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    modules = []
    ctx = context(tmp_path, sim, dtype="bfloat16", on_step=after_step)
    rl = rl_settings(steps=1, prompts_per_step=1, group_size=2, max_new_tokens=16, lora=LoraConf(r=4, alpha=8))
    train_rl(str(tiny_xs), get_algo("dapo", dynamic_sampling=False), rl_tasks, [], ctx, rl=rl,
             objective=Objective(module=lambda *a, **kw: modules.append(RLModule(*a, **kw)) or modules[-1]))
    # the frozen base in model.dtype (half of fp32's memory), the trained adapter in fp32
    assert seen["dtypes"] == {(False, False, torch.bfloat16), (True, True, torch.float32)}
    # hf/ is the merge in fp32, by hand: W (bf16, exact in fp32) + B @ A * alpha / r (one step of an
    # untrained model may leave B at 0: the merge of a nonzero adapter is test_model_policy's)
    state, exported = seen["state"], weights(tmp_path / "hf")
    assert {v.dtype for v in exported.values()} == {torch.float32}
    layer = "base_model.model.model.layers.0.self_attn.q_proj"
    w, a, b = (state[f"{layer}.{k}.weight"] for k in ("base_layer", "lora_A.default", "lora_B.default"))
    torch.testing.assert_close(exported["model.layers.0.self_attn.q_proj.weight"], w.float() + b @ a * 2.0,
                               rtol=0, atol=1e-6)
    assert torch.equal(exported["model.norm.weight"], state["base_model.model.model.norm.weight"].float())
