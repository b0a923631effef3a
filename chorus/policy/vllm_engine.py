"""The generation engine on vLLM (GPU machines, optional: `pip install 'vllm>=0.10.2'`).

Only vLLM's public API is used: `LLM(...)`, `LLM.generate`, `LLM.collective_rpc` on a worker
extension (`worker_extension_cls`, the hook vLLM's RLHF examples, TRL and verl use to reach the
model inside vLLM's worker) and `LLM.reset_prefix_cache`.

Why vLLM >= 0.10.2: `logprobs_mode` came in 0.10.0, whose "processed_logprobs" were still taken
before temperature; 0.10.2's sampler takes them after temperature and top-k/top-p (the
distribution actually sampled; 0.10.1 unchecked). The default, "raw_logprobs", is the model's
distribution before temperature. The RL update
recomputes old log-probs with the trainer's own forward pass, so the engine's are a diagnostic
(`old_logprob_gap`) and for evaluations, but they must still be the sampled distribution's.

The engine lives in the trainer's process (VLLM_ENABLE_V1_MULTIPROCESSING=0, one GPU per engine):
the trainer's full tensors reach the worker by reference through `collective_rpc`, never
serialised. After each weight load the prefix cache is reset, or prompts cached before the update
would be continued with KV computed by the old weights.

The pure functions below turn our settings into vLLM's arguments, so they are tested without vLLM;
the classes touch vLLM only through the `LLM` object they are given.
"""
from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version

from .fence_stop import FENCES

MIN_VLLM = "0.10.2"
# The worker extension's import path (vLLM imports it inside its worker) and its one method; the
# name is ours so it cannot clash with a method of vLLM's own worker class.
EXTENSION = "chorus.policy.vllm_engine.WeightSyncExtension"
LOAD_METHOD = "chorus_load_weights"
# chorus.evaluate's engine has the GPU to itself: the share vLLM may take (weights + KV cache). RL
# passes rl.vllm_memory instead, as it shares the GPU with the trainer.
GPU_MEMORY_UTILIZATION = 0.85
# A completion stops when its fenced block closes (the HF engine's rule, fence_stop.fence_closed): a
# fence line on its own. The opening fence carries a language tag, so it never matches.
STOP = tuple(f"\n{fence}\n" for fence in FENCES)
TOP_K_DISABLED = -1  # vLLM's "consider all tokens" in every version from 0.10.2 on (0 only in newer ones)


def vllm_version() -> str | None:
    """The installed vLLM's version, or None; read from the package metadata (importing vLLM is slow)."""
    try:
        return version("vllm")
    except PackageNotFoundError:
        return None


def check_vllm(found: str | None) -> None:
    """Refuse a missing or too old vLLM with the fix."""
    from packaging.version import Version

    if found is None:
        raise ValueError(f"engine=vllm needs vllm>={MIN_VLLM} on a GPU machine (pip install 'vllm>={MIN_VLLM}'); "
                         "use engine=hf here")
    if Version(found) < Version(MIN_VLLM):
        raise ValueError(f"engine=vllm needs vllm>={MIN_VLLM}, found {found} (pip install -U 'vllm>={MIN_VLLM}')")


def check_in_process(environ) -> None:
    """The weight sync hands tensors to vLLM's worker by reference, which needs the engine core in
    this process; refuse a setting that would move it into another one."""
    if environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "0") != "0":
        raise ValueError("engine=vllm runs vLLM inside the trainer's process; unset VLLM_ENABLE_V1_MULTIPROCESSING "
                         "(or set it to 0)")


def llm_kwargs(path: str, dtype: str, seed: int, gpu_memory: float = GPU_MEMORY_UTILIZATION) -> dict:
    """`LLM(**...)` for a model path or id, in `dtype`, seeded, taking `gpu_memory` of the GPU."""
    if not 0 < gpu_memory <= 1:
        raise ValueError(f"vLLM's GPU memory share must be in (0, 1], got {gpu_memory}; set rl.vllm_memory")
    return dict(model=path, dtype=dtype, seed=seed, gpu_memory_utilization=gpu_memory,
                tensor_parallel_size=1, logprobs_mode="processed_logprobs", worker_extension_cls=EXTENSION)


def sampling_kwargs(n: int, params) -> dict:
    """`vllm.SamplingParams(**...)` for `n` samples under our `SamplingParams` (engines.py): the
    sampled token's log-prob at each step (logprobs=0), stop once a fenced block closes."""
    return dict(n=n, temperature=params.temperature, top_p=params.top_p,
                top_k=params.top_k if params.top_k > 0 else TOP_K_DISABLED, max_tokens=params.max_new_tokens,
                seed=params.seed, logprobs=0, stop=list(STOP), include_stop_str_in_output=True)


def finish_reason(reason: str | None, stop_reason) -> str:
    """Our finish reason from vLLM's: `length` at max_tokens; `stop` when a stop string matched
    (vLLM's stop_reason names it); otherwise the model emitted EOS."""
    if reason == "length":
        return "length"
    return "stop" if stop_reason is not None else "eos"


class WeightSyncExtension:
    """Mixed into vLLM's GPU worker (`LLM(worker_extension_cls=EXTENSION)`); `self.model_runner.model`
    is the vLLM model, a torch module whose `load_weights` takes (Hugging Face name, tensor) pairs and
    returns the names of the parameters it filled (sharding, fusing and dtype are its business)."""

    def chorus_load_weights(self, named_tensors: list) -> int:
        """Load the trainer's full tensors; refuse a load that leaves any engine parameter out (it
        would keep generating with the old value). Returns how many tensors were given."""
        model = self.model_runner.model
        loaded = model.load_weights(weights=named_tensors)
        if loaded is not None:  # vLLM's own loader makes the same check on the names returned
            missing = sorted({name for name, _ in model.named_parameters()} - set(loaded))
            if missing:
                raise ValueError(f"the weight sync left {len(missing)} vLLM parameters unset (first: {missing[0]}); "
                                 "the trainer's state dict does not match the engine's model")
        return len(named_tensors)


class VLLMEngine:
    """`generate` and `sync_weights` on a vLLM `LLM`. `sampling_params` is vLLM's SamplingParams class
    and `generation` our result type (engines.Generation: engines.py imports this module, so it
    hands the type in rather than this module importing it back)."""

    def __init__(self, llm, tokenizer, sampling_params, generation):
        self.llm, self.tok, self.sampling_params, self.generation = llm, tokenizer, sampling_params, generation

    @classmethod
    def open(cls, path: str, tokenizer, *, dtype: str, seed: int, generation,
             gpu_memory: float = GPU_MEMORY_UTILIZATION) -> "VLLMEngine":
        check_vllm(vllm_version())
        check_in_process(os.environ)
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        try:
            from vllm import LLM, SamplingParams
        except ImportError as exc:
            raise ValueError(f"engine=vllm cannot import vllm ({exc}); check its install against this torch and CUDA, "
                             "or use engine=hf") from None
        return cls(LLM(**llm_kwargs(path, dtype, seed, gpu_memory)), tokenizer, SamplingParams, generation)

    def generate(self, prompts: list[str], n: int, params) -> list[list]:
        """`n` samples for each prompt under `params` (engines.SamplingParams); result[i][j] is sample j
        of prompt i. Prompts go in as token
        ids tokenized like the trainer's (no special tokens added), so the engine continues exactly
        the sequence the update scores."""
        ids = [self.tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
        requests = [{"prompt_token_ids": i} for i in ids]
        outputs = self.llm.generate(requests, self.sampling_params(**sampling_kwargs(n, params)), use_tqdm=False)
        result = []
        for prompt_ids, request in zip(ids, outputs):
            gens = []
            for c in request.outputs:
                tokens = list(c.token_ids)
                lps = [float(step[t].logprob) for step, t in zip(c.logprobs or [], tokens)]
                gens.append(self.generation(c.text, tokens, lps, finish_reason(c.finish_reason, c.stop_reason),
                                            len(prompt_ids)))
            result.append(gens)
        return result

    def sync_weights(self, named_tensors) -> None:
        """Replace the engine's weights with the trainer's (full, unsharded tensors with HF names),
        then drop the prefix cache, whose KV the old weights computed."""
        tensors = list(named_tensors)
        self.llm.collective_rpc(LOAD_METHOD, args=(tensors,))
        if self.llm.reset_prefix_cache() is False:
            raise RuntimeError("vLLM refused to reset its prefix cache after a weight sync (requests still running?); "
                               "its cached KV would come from the old weights")
