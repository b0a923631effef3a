"""The vLLM engine without vLLM: vLLM cannot run here (no GPU, and it pins a CUDA torch while the
project pins 2.13.0+cpu), so these tests check what can be checked without it, on real pieces
otherwise: the arguments we hand vLLM, the worker extension loading a real tiny transformers model,
the weight sync's order (load, then reset the prefix cache) through the real `weight_sync`, and the
errors for a missing or too old vLLM. Where vLLM's `LLM` object is needed, `RecordingLLM` stands in
for it; what vLLM itself does with these arguments is untested here."""
import importlib
from types import SimpleNamespace

import pytest
import torch

from chorus.config.schema import RLConf
from chorus.policy import vllm_engine
from chorus.policy.engines import Generation, SamplingParams, make_engine
from chorus.policy.models import load_model
from chorus.policy.vllm_engine import (EXTENSION, LOAD_METHOD, MIN_VLLM, VLLMEngine, WeightSyncExtension,
                                       check_in_process, check_vllm, finish_reason, llm_kwargs, sampling_kwargs)
from chorus.rl.run import weight_sync
from vllm_standin import with_load_weights


class RecordingLLM:
    """Stands in for `vllm.LLM` (which cannot run here): the public methods VLLMEngine calls, with
    `collective_rpc` running the named method on one in-process worker as vLLM's single-process
    executor does, every call recorded in order."""

    def __init__(self, worker=None, outputs=(), reset_ok=True):
        self.worker, self.outputs, self.reset_ok, self.calls = worker, list(outputs), reset_ok, []

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        self.calls.append(("collective_rpc", method))
        return [getattr(self.worker, method)(*args, **(kwargs or {}))]

    def reset_prefix_cache(self):
        self.calls.append(("reset_prefix_cache",))
        return self.reset_ok

    def generate(self, prompts, sampling_params, use_tqdm=True):
        self.calls.append(("generate", prompts, sampling_params))
        return self.outputs


class Worker(WeightSyncExtension):
    """vLLM's GPU worker as the extension sees it (vLLM adds the extension class to its worker's
    bases): `self.model_runner.model`."""

    def __init__(self, model):
        self.model_runner = SimpleNamespace(model=model)


@pytest.fixture
def models(tiny_xs):
    """(trainer, engine model, tokenizer): the trainer in fp32, moved away from the checkpoint the
    engine (bf16, like ctx.dtype on GPUs) was loaded from."""
    trainer, tok = load_model("hf", path=str(tiny_xs), dtype="float32")
    engine_model, _ = load_model("hf", path=str(tiny_xs), dtype="bfloat16")
    nudge(trainer, seed=0)
    return trainer, with_load_weights(engine_model), tok


def nudge(model, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))


def step(chosen: int, logprob: float) -> dict:
    """One position of a vLLM completion's `logprobs`: token id -> Logprob, the sampled token among others."""
    return {chosen: SimpleNamespace(logprob=logprob), chosen + 1: SimpleNamespace(logprob=-9.0)}


def mismatched(trainer, engine_model) -> list[str]:
    """Engine parameters that do not hold the trainer's value (in the engine's dtype)."""
    mine = dict(trainer.named_parameters())
    return [n for n, p in engine_model.named_parameters() if not torch.equal(p, mine[n].to(p.dtype))]


def test_llm_arguments_ask_for_processed_logprobs_and_install_the_weight_sync_extension():
    kw = llm_kwargs("org/model", "bfloat16", 7)
    # raw_logprobs (vLLM's default) are before temperature; the trainer scores at the sampling temperature
    assert kw["logprobs_mode"] == "processed_logprobs"
    assert (kw["model"], kw["dtype"], kw["seed"], kw["tensor_parallel_size"]) == ("org/model", "bfloat16", 7, 1)
    module, _, name = kw["worker_extension_cls"].rpartition(".")
    extension = getattr(importlib.import_module(module), name)  # what vLLM does with the string in its worker
    assert kw["worker_extension_cls"] == EXTENSION and callable(getattr(extension, LOAD_METHOD))


def test_rl_gives_vllm_its_memory_share_and_a_bad_share_is_refused(monkeypatch):
    # colocated with the trainer's fp32 masters and AdamW state, RL's engine takes rl.vllm_memory, not
    # the 0.85 of an engine that has the GPU to itself
    assert llm_kwargs("m", "bfloat16", 0)["gpu_memory_utilization"] == 0.85
    assert llm_kwargs("m", "bfloat16", 0, RLConf().vllm_memory)["gpu_memory_utilization"] == 0.3
    with pytest.raises(ValueError, match="rl.vllm_memory"):
        llm_kwargs("m", "bfloat16", 0, 1.5)
    seen = {}
    monkeypatch.setattr(vllm_engine.VLLMEngine, "open", classmethod(lambda cls, *a, **kw: seen.update(kw)))
    make_engine("vllm", None, None, path="m", gpu_memory=0.25)
    assert seen["gpu_memory"] == 0.25


def test_sampling_arguments_map_our_settings_and_ask_for_the_sampled_tokens_logprob():
    kw = sampling_kwargs(4, SamplingParams(max_new_tokens=64, temperature=0.7, top_p=0.9, top_k=20, seed=5))
    assert {k: kw[k] for k in ("n", "temperature", "top_p", "top_k", "max_tokens", "seed", "logprobs")} == \
        dict(n=4, temperature=0.7, top_p=0.9, top_k=20, max_tokens=64, seed=5, logprobs=0)
    assert "stop" not in kw  # the HF engine's fence rule is applied to the tokens afterwards (fence_cut)
    # our top_k=0 means "no top-k", which vLLM >= 0.10.2 spells -1 (0 is rejected by some of those versions)
    assert sampling_kwargs(1, SamplingParams(top_k=0))["top_k"] == -1


def test_finish_reasons_follow_vllms():
    assert finish_reason("length", False) == "length"
    assert finish_reason("length", True) == "stop"  # the fence closed: cut there, whatever vLLM did after
    assert finish_reason("stop", False) == "eos"


def test_the_extension_loads_the_trainers_weights_into_a_real_model(models):
    trainer, engine_model, _ = models
    named = list(trainer.state_dict().items())
    assert len(mismatched(trainer, engine_model)) == len(list(engine_model.parameters()))
    assert Worker(engine_model).chorus_load_weights(named) == len(named)
    assert mismatched(trainer, engine_model) == []


def test_the_extension_refuses_a_sync_that_leaves_an_engine_parameter_out(models):
    trainer, engine_model, _ = models
    partial = [(n, t) for n, t in trainer.state_dict().items() if n != "model.norm.weight"]
    with pytest.raises(ValueError, match=r"1 vLLM parameters unset \(first: model.norm.weight\)"):
        Worker(engine_model).chorus_load_weights(partial)


def test_each_sync_loads_the_weights_then_resets_the_prefix_cache(models):
    trainer, engine_model, tok = models
    llm = RecordingLLM(Worker(engine_model))
    sync = weight_sync(VLLMEngine(llm, tok, dict, Generation))
    sync(trainer)
    assert llm.calls == [("collective_rpc", LOAD_METHOD), ("reset_prefix_cache",)]
    assert mismatched(trainer, engine_model) == []
    nudge(trainer, seed=1)  # the next update
    sync(trainer)
    assert llm.calls == [("collective_rpc", LOAD_METHOD), ("reset_prefix_cache",)] * 2
    assert mismatched(trainer, engine_model) == []


def test_a_sync_streams_bf16_buckets_and_checks_every_parameter_across_them(models, monkeypatch):
    """The trainer's tensors are read one at a time and loaded in buckets of at most SYNC_BUCKET_BYTES,
    each cast to the engine's dtype as it is made: the first bucket reaches vLLM before the last
    tensor is read, no fp32 tensor crosses, and the missing-parameter check spans the buckets."""
    trainer, engine_model, tok = models
    monkeypatch.setattr(vllm_engine, "SYNC_BUCKET_BYTES", 64 * 1024)
    read, seen = [], []
    worker = Worker(engine_model)
    load = worker.chorus_load_weights

    def recording(named, last=True):
        seen.append((len(read), {t.dtype for _, t in named}, last))
        return load(named, last)
    worker.chorus_load_weights = recording

    def lazily():
        for name, tensor in trainer.state_dict().items():
            read.append(name)
            yield name, tensor
    engine = VLLMEngine(RecordingLLM(worker), tok, dict, Generation, dtype="bfloat16")
    engine.sync_weights(lazily())
    n = len(trainer.state_dict())
    assert len(seen) > 2 and seen[0][0] < n  # several buckets; the first loaded before the last tensor was read
    assert all(dtypes == {torch.bfloat16} for _, dtypes, _ in seen)
    assert [last for *_, last in seen] == [False] * (len(seen) - 1) + [True]
    bf16 = {k: v.to(torch.bfloat16).float() for k, v in trainer.state_dict().items()}
    assert all(torch.equal(p.float(), bf16[k]) for k, p in engine_model.state_dict().items() if k in bf16)
    # a parameter left out of the second-to-last bucket is still caught at the end
    partial = (item for item in trainer.state_dict().items() if item[0] != "model.norm.weight")
    with pytest.raises(ValueError, match=r"1 vLLM parameters unset \(first: model.norm.weight\)"):
        VLLMEngine(RecordingLLM(Worker(engine_model)), tok, dict, Generation).sync_weights(partial)


def test_a_refused_prefix_cache_reset_stops_the_run(models):
    trainer, engine_model, tok = models
    engine = VLLMEngine(RecordingLLM(Worker(engine_model), reset_ok=False), tok, dict, Generation)
    with pytest.raises(RuntimeError, match="reset its prefix cache"):
        engine.sync_weights(trainer.state_dict().items())


def test_generate_sends_the_trainers_token_ids_and_reads_the_sampled_tokens_logprobs(tiny_xs):
    tok = load_model("hf", path=str(tiny_xs))[1]
    outputs = [SimpleNamespace(outputs=[
        SimpleNamespace(text="```sv\nx\n```\n", token_ids=[5, 6], logprobs=[step(5, -0.5), step(6, -0.25)],
                        finish_reason="stop", stop_reason="\n```\n"),
        SimpleNamespace(text="y", token_ids=[7], logprobs=[step(7, -1.5)], finish_reason="length", stop_reason=None)]),
        SimpleNamespace(outputs=[
            SimpleNamespace(text="z", token_ids=[8], logprobs=[step(8, -2.0)], finish_reason="stop", stop_reason=None),
            SimpleNamespace(text="w", token_ids=[9], logprobs=[step(9, -3.0)], finish_reason="stop",
                            stop_reason=None)])]
    llm = RecordingLLM(outputs=outputs)
    prompts = ["<|im_start|>user\nmodule and2<|im_end|>\n", "tb for cnt"]
    params = SamplingParams(max_new_tokens=32, temperature=0.8, seed=3)
    gens = VLLMEngine(llm, tok, dict, Generation).generate(prompts, 2, params)
    _, requests, sampling = llm.calls[0]
    assert requests == [{"prompt_token_ids": tok(p, add_special_tokens=False)["input_ids"]} for p in prompts]
    assert sampling == sampling_kwargs(2, params, (tok.eos_token_id,))  # built without a checkpoint: the tokenizer's
    first = gens[0][0]
    # its tokens (5, 6) close no fence, whatever the stand-in's text says: the rule reads the tokens
    # (test_vllm_lifecycle.py cuts real fenced completions)
    assert (first.token_ids, first.logprobs, first.finish_reason) == ([5, 6], [-0.5, -0.25], "eos")
    assert first.prompt_tokens == len(requests[0]["prompt_token_ids"])
    assert [[g.finish_reason for g in row] for row in gens] == [["eos", "length"], ["eos", "eos"]]
    assert gens[1][1].logprobs == [-3.0]


def test_a_missing_or_too_old_vllm_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=rf"needs vllm>={MIN_VLLM} on a GPU machine \(pip install"):
        check_vllm(None)
    with pytest.raises(ValueError, match=rf"needs vllm>={MIN_VLLM}, found 0.10.1 \(pip install -U"):
        check_vllm("0.10.1")
    with pytest.raises(ValueError, match="found 0.10.2rc1"):
        check_vllm("0.10.2rc1")  # a release candidate comes before the release
    for ok in ("0.10.2", "0.11.0", "0.22.1.dev5+g1234abc"):
        check_vllm(ok)


def test_make_engine_vllm_checks_the_version_before_importing_vllm(tiny_xs, monkeypatch):
    tok = load_model("hf", path=str(tiny_xs))[1]
    monkeypatch.setattr(vllm_engine, "vllm_version", lambda: "0.9.2")
    with pytest.raises(ValueError, match=r"found 0.9.2 \(pip install -U 'vllm>="):
        make_engine("vllm", None, tok, path=str(tiny_xs))
    monkeypatch.setattr(vllm_engine, "vllm_version", lambda: None)
    with pytest.raises(ValueError, match="use engine=hf here"):
        make_engine("vllm", None, tok, path=str(tiny_xs))


@pytest.mark.skipif(vllm_engine.vllm_version() is not None, reason="vLLM is installed here")
def test_make_engine_vllm_without_vllm_installed_says_how_to_install_it(tiny_xs):
    tok = load_model("hf", path=str(tiny_xs))[1]
    with pytest.raises(ValueError, match=rf"pip install 'vllm>={MIN_VLLM}'"):
        make_engine("vllm", None, tok, path=str(tiny_xs))


def test_the_engine_must_run_in_the_trainers_process(tiny_xs, monkeypatch):
    check_in_process({})
    check_in_process({"VLLM_ENABLE_V1_MULTIPROCESSING": "0"})
    with pytest.raises(ValueError, match="unset VLLM_ENABLE_V1_MULTIPROCESSING"):
        check_in_process({"VLLM_ENABLE_V1_MULTIPROCESSING": "1"})
    tok = load_model("hf", path=str(tiny_xs))[1]
    monkeypatch.setattr(vllm_engine, "vllm_version", lambda: MIN_VLLM)
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    with pytest.raises(ValueError, match="inside the trainer's process"):
        make_engine("vllm", None, tok, path=str(tiny_xs))


def test_make_engine_vllm_needs_a_path(tiny_xs):
    tok = load_model("hf", path=str(tiny_xs))[1]
    with pytest.raises(ValueError, match="engine=vllm needs the model's path or id"):
        make_engine("vllm", None, tok)
