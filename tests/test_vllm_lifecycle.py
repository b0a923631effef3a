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
from chorus.rl.run import train_rl
from helpers import PROMPT, context, lines, rl_settings, weights


def run(init, out, rl_tasks, sim, **over):
    ctx = context(out, sim)
    rl = rl_settings(engine="vllm", max_new_tokens=24, prompts_per_step=1, group_size=2, **over)
    return train_rl(str(init), get_algo("dapo", dynamic_sampling=False), rl_tasks, rl_tasks[:1], ctx, rl=rl)


@pytest.mark.slow
def test_the_engine_starts_from_the_trained_weights_sleeps_through_updates_and_resumes_synced(
        sft_xs, rl_tasks, sim, tmp_path, monkeypatch):
    vllm_standin.install(monkeypatch)
    vllm_standin.BUILT.clear()
    run(sft_xs, tmp_path, rl_tasks, sim, steps=1)
    [llm] = vllm_standin.BUILT
    # built at train start, synced before its first rollout; each rollout then sleeps, each update's
    # sync wakes it and reloads; the final evaluation samples from the last weights
    assert llm.calls[:3] == ["load", "reset", "generate"]
    per_step = ["sleep1", "wake", "load", "reset"]
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
