"""A stand-in for `vllm.LLM` that really generates (vLLM cannot run here: no GPU, and it pins a CUDA
torch): a real tiny transformers model loaded from the path vLLM would load, sampling through the
HF engine, taking weight syncs through chorus's worker extension (WeightSyncExtension on that
model), with sleep/wake and every call recorded in order. Sleep is vLLM's level 1 by tag: sleeping
puts both "weights" and "kv_cache" to sleep, `wake_up(tags=...)` wakes the ones named (all without
tags); a load needs the weights awake, generation needs both. `install` makes VLLMEngine.open build it,
so chorus's own VLLMEngine (arguments, fence cut, log-probs, sync, sleep) runs unchanged around it.
What vLLM itself does with the arguments stays untested."""
from __future__ import annotations

from types import SimpleNamespace

import torch

from chorus.policy.engines import HFEngine, SamplingParams
from chorus.policy.models import load_model
from chorus.policy.vllm_engine import VLLMEngine, WeightSyncExtension

BUILT: list["StandInLLM"] = []  # every engine built in this process, in order


def with_load_weights(model):
    """vLLM models' `load_weights`: copy (name, tensor) pairs into the parameters of those names and
    return the names filled; a name with no parameter of its own (the tied lm_head) is skipped."""
    params = dict(model.named_parameters())

    def load_weights(weights):
        filled = set()
        with torch.no_grad():
            for name, tensor in weights:
                if name in params:
                    params[name].copy_(tensor)
                    filled.add(name)
        return filled

    model.load_weights = load_weights
    return model


SLEEP_TAGS = ("weights", "kv_cache")  # vLLM's names for what sleep mode frees


class StandInLLM:
    # a test's probe (set it as a staticmethod), called with the tags at each wake_up before they
    # wake, e.g. to look at the trainer's gradients at that moment
    on_wake = None

    def __init__(self, **kwargs):
        import torch.distributed as dist

        self.kwargs, self.calls, self.sleeping = kwargs, [], set()
        # what the engine found when it was built: a process group (its size) or none
        self.world_at_build = dist.get_world_size() if dist.is_available() and dist.is_initialized() else None
        self.model, self.tok = load_model("hf", path=kwargs["model"], dtype="float32")
        self.worker = SimpleNamespace(model_runner=SimpleNamespace(model=with_load_weights(self.model)))
        self.worker.chorus_load_weights = WeightSyncExtension.chorus_load_weights.__get__(self.worker)
        BUILT.append(self)

    def weights(self) -> dict:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    @property
    def asleep(self) -> bool:
        return bool(self.sleeping)

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        assert "weights" not in self.sleeping, "weights loaded while they sleep on the CPU"
        self.calls.append("load")
        self.loaded_names = [name for name, _ in args[0]]  # what the last sync pushed
        return [getattr(self.worker, method)(*args, **(kwargs or {}))]

    def reset_prefix_cache(self):
        self.calls.append("reset")
        return True

    def sleep(self, level=1):
        assert not self.sleeping, "slept twice"
        self.calls.append(f"sleep{level}")
        self.sleeping = set(SLEEP_TAGS)

    def wake_up(self, tags=None):
        tags = list(SLEEP_TAGS) if tags is None else list(tags)
        assert set(tags) <= set(SLEEP_TAGS), f"vLLM has no sleep tag {tags}"
        assert set(tags) <= self.sleeping, f"woke {tags} while awake"
        if self.on_wake:
            self.on_wake(tags)
        self.calls.append("wake:" + ",".join(tags))
        self.sleeping -= set(tags)

    def generate(self, requests, sampling_params: dict, use_tqdm=True):
        assert not self.asleep, "generate while asleep"
        self.calls.append("generate")
        prompts = [self.tok.decode(r["prompt_token_ids"]) for r in requests]
        p = sampling_params
        params = SamplingParams(max_new_tokens=p["max_tokens"], temperature=p["temperature"], top_p=p["top_p"],
                                top_k=max(0, p["top_k"]), seed=p["seed"])
        # vLLM stops at its tokenizer's EOS and at every id of stop_token_ids (with the model's own
        # generation config's EOS ids added): those given, and nothing else
        stops = (self.tok.eos_token_id, *p.get("stop_token_ids", []))
        gens = HFEngine(self.model, self.tok, generation="plain", stop_ids=stops).generate(prompts, n=p["n"],
                                                                                           params=params)
        return [SimpleNamespace(outputs=[SimpleNamespace(
            text=g.text, token_ids=g.token_ids, finish_reason="length" if g.finish_reason == "length" else "stop",
            stop_reason=None, logprobs=[{t: SimpleNamespace(logprob=lp)} for t, lp in zip(g.token_ids, g.logprobs)])
            for g in row]) for row in gens]


def install(monkeypatch=None) -> None:
    """VLLMEngine.open builds a StandInLLM from the same llm_kwargs vLLM would get (and skips the
    version and import checks, which need vLLM)."""
    from chorus.policy.stops import checkpoint_eos_ids
    from chorus.policy.vllm_engine import llm_kwargs

    def open_(cls, path, tokenizer, *, dtype, seed, generation, gpu_memory=0.85, **options):
        return cls(StandInLLM(**llm_kwargs(path, dtype, seed, gpu_memory, **options)), tokenizer, dict, generation,
                   checkpoint_eos_ids(tokenizer, path))

    if monkeypatch is None:
        VLLMEngine.open = classmethod(open_)
    else:
        monkeypatch.setattr(VLLMEngine, "open", classmethod(open_))
