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
would be continued with KV computed by the old weights. Under a multi-process strategy (DDP, FSDP)
RL builds it only once the process group exists (rl/run.py, at train start) with vLLM's
`external_launcher` backend, one engine of tensor-parallel size 1 per rank, as TRL's colocate mode
does: vLLM's own executor would otherwise initialise torch.distributed with a world of 1, which
Lightning then keeps, and every rank would train alone. `sleep` (level 1: weights to the CPU, KV
cache dropped) frees the engine's memory for the update; `sync_weights` wakes its weights, loads,
resets the prefix cache and only then wakes its KV cache.

The stop rule is the HF engine's (fence_stop.fence_closed, applied to the tokens afterwards): a
stop string cannot tell a closing fence from an untagged opening one, so none is given, and a
completion is cut at the token where its fenced block closes (the tokens vLLM drew after it are
dropped, as HF would not have drawn them).

The pure functions below turn our settings into vLLM's arguments, so they are tested without vLLM;
the classes touch vLLM only through the `LLM` object they are given.
"""
from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version

import torch

from .fence_stop import FenceStop
from .stops import checkpoint_eos_ids, eos_ids

MIN_VLLM = "0.10.2"
# The worker extension's import path (vLLM imports it inside its worker) and its one method; the
# name is ours so it cannot clash with a method of vLLM's own worker class.
EXTENSION = "chorus.policy.vllm_engine.WeightSyncExtension"
LOAD_METHOD = "chorus_load_weights"
# a weight sync hands vLLM its tensors in buckets of about this many bytes, each cast to the engine's
# dtype as it is made: the trainer holds one bucket (and one full fp32 tensor under FSDP) at a time,
# not a whole fp32 copy of the model (~15 GiB at 4B) per rank
SYNC_BUCKET_BYTES = 1 << 30
# chorus.evaluate's engine has the GPU to itself: the share vLLM may take (weights + KV cache). RL
# passes rl.vllm_memory instead, as it shares the GPU with the trainer.
GPU_MEMORY_UTILIZATION = 0.85
# vLLM's sleep-mode tags: what `LLM.wake_up(tags=...)` brings back (weights, or the KV cache)
WEIGHTS, KV_CACHE = "weights", "kv_cache"
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


def llm_kwargs(path: str, dtype: str, seed: int, gpu_memory: float = GPU_MEMORY_UTILIZATION,
               max_model_len: int | None = None, max_num_seqs: int | None = None, distributed: bool = False,
               sleep: bool = False) -> dict:
    """`LLM(**...)` for a model path or id, in `dtype`, seeded, taking `gpu_memory` of the GPU; at most
    `max_model_len` tokens per sequence (prompt + completion: without it Qwen3-4B reserves KV for
    40,960) and `max_num_seqs` at once; `distributed`: inside an existing process group (one engine
    per rank, vLLM's external_launcher); `sleep`: sleep mode on (VLLMEngine.sleep)."""
    if not 0 < gpu_memory <= 1:
        raise ValueError(f"vLLM's GPU memory share must be in (0, 1], got {gpu_memory}; set rl.vllm_memory")
    kw = dict(model=path, dtype=dtype, seed=seed, gpu_memory_utilization=gpu_memory,
              tensor_parallel_size=1, logprobs_mode="processed_logprobs", worker_extension_cls=EXTENSION)
    if max_model_len:
        kw["max_model_len"] = max_model_len
    if max_num_seqs:
        kw["max_num_seqs"] = max_num_seqs
    if distributed:
        kw["distributed_executor_backend"] = "external_launcher"
    if sleep:
        kw["enable_sleep_mode"] = True
    return kw


def sampling_kwargs(n: int, params, stop_ids: tuple[int, ...] = ()) -> dict:
    """`vllm.SamplingParams(**...)` for `n` samples under our `SamplingParams` (engines.py): the
    sampled token's log-prob at each step (logprobs=0); the EOS ids the HF engine stops at, given
    explicitly (policy/stops.py; vLLM adds its model's own, the same list); no stop string (the fence
    rule is applied afterwards: fence_cut)."""
    return dict(n=n, temperature=params.temperature, top_p=params.top_p,
                top_k=params.top_k if params.top_k > 0 else TOP_K_DISABLED, max_tokens=params.max_new_tokens,
                seed=params.seed, logprobs=0, stop_token_ids=list(stop_ids))


def fence_cut(tokenizer, token_ids: list[int]) -> int | None:
    """The number of tokens after which the completion's fenced block closes (the HF engine's rule, at
    the same token), or None."""
    state = FenceStop(tokenizer, 1)
    for k, t in enumerate(token_ids):
        if state.update([t])[0]:
            return k + 1
    return None


def finish_reason(reason: str | None, cut: bool) -> str:
    """Our finish reason: `stop` where the fence rule cut the completion; else `length` at max_tokens;
    otherwise the model emitted EOS."""
    if cut:
        return "stop"
    return "length" if reason == "length" else "eos"


class WeightSyncExtension:
    """Mixed into vLLM's GPU worker (`LLM(worker_extension_cls=EXTENSION)`); `self.model_runner.model`
    is the vLLM model, a torch module whose `load_weights` takes (Hugging Face name, tensor) pairs and
    returns the names of the parameters it filled (sharding, fusing and dtype are its business)."""

    def chorus_load_weights(self, named_tensors: list, last: bool = True) -> int:
        """Load one bucket of the trainer's full tensors; at the `last` bucket of a sync, refuse a sync
        that left any engine parameter out (it would keep generating with the old value). Returns how
        many tensors were given."""
        model = self.model_runner.model
        loaded = model.load_weights(weights=named_tensors)
        seen = self.__dict__.setdefault("_chorus_loaded", set())
        seen.update(loaded or ())
        if last:
            self._chorus_loaded = set()
            if loaded is not None:  # vLLM's own loader makes the same check on the names returned
                missing = sorted({name for name, _ in model.named_parameters()} - seen)
                if missing:
                    raise ValueError(f"the weight sync left {len(missing)} vLLM parameters unset (first: "
                                     f"{missing[0]}); the trainer's state dict does not match the engine's model")
        return len(named_tensors)


def buckets(named_tensors, dtype, limit: int | None = None):
    """(bucket, is_last) of `named_tensors` (an iterable, read lazily) with each floating tensor cast to
    `dtype` (None: as it is), a bucket closed once it holds `limit` bytes (default SYNC_BUCKET_BYTES)."""
    limit = limit or SYNC_BUCKET_BYTES
    bucket, size = [], 0
    for name, tensor in named_tensors:
        if dtype is not None and tensor.is_floating_point():
            tensor = tensor.detach().to(dtype)
        if bucket and size + tensor.numel() * tensor.element_size() > limit:
            yield bucket, False
            bucket, size = [], 0
        bucket.append((name, tensor))
        size += tensor.numel() * tensor.element_size()
    yield bucket, True


class VLLMEngine:
    """`generate` and `sync_weights` on a vLLM `LLM`. `sampling_params` is vLLM's SamplingParams class
    and `generation` our result type (engines.Generation: engines.py imports this module, so it
    hands the type in rather than this module importing it back)."""

    def __init__(self, llm, tokenizer, sampling_params, generation, stop_ids: tuple[int, ...] | None = None,
                 dtype: str | None = None):
        self.llm, self.tok, self.sampling_params, self.generation = llm, tokenizer, sampling_params, generation
        self.dtype = getattr(torch, dtype) if dtype else None  # what a sync casts the trainer's tensors to
        self.stops = tuple(stop_ids) if stop_ids else eos_ids(tokenizer)  # open(): the checkpoint's list
        self.asleep = False

    @classmethod
    def open(cls, path: str, tokenizer, *, dtype: str, seed: int, generation,
             gpu_memory: float = GPU_MEMORY_UTILIZATION, **options) -> "VLLMEngine":
        """`options`: llm_kwargs' max_model_len, max_num_seqs, distributed and sleep."""
        check_vllm(vllm_version())
        check_in_process(os.environ)
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        try:
            from vllm import LLM, SamplingParams
        except ImportError as exc:
            raise ValueError(f"engine=vllm cannot import vllm ({exc}); check its install against this torch and CUDA, "
                             "or use engine=hf") from None
        return cls(LLM(**llm_kwargs(path, dtype, seed, gpu_memory, **options)), tokenizer, SamplingParams, generation,
                   checkpoint_eos_ids(tokenizer, path), dtype)

    def generate(self, prompts: list[str], n: int, params) -> list[list]:
        """`n` samples for each prompt under `params` (engines.SamplingParams); result[i][j] is sample j
        of prompt i. Prompts go in as token
        ids tokenized like the trainer's (no special tokens added), so the engine continues exactly
        the sequence the update scores."""
        if self.asleep:
            raise RuntimeError("the vLLM engine is asleep (its weights on the CPU); sync_weights wakes it")
        ids = [self.tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
        requests = [{"prompt_token_ids": i} for i in ids]
        outputs = self.llm.generate(requests, self.sampling_params(**sampling_kwargs(n, params, self.stops)), use_tqdm=False)
        result = []
        for prompt_ids, request in zip(ids, outputs):
            gens = []
            for c in request.outputs:
                tokens = list(c.token_ids)
                lps = [float(step[t].logprob) for step, t in zip(c.logprobs or [], tokens)]
                cut = fence_cut(self.tok, tokens)
                text = c.text if cut is None else self.tok.decode(tokens[:cut], skip_special_tokens=True)
                tokens, lps = tokens[:cut], lps[:cut]  # [:None] keeps all
                gens.append(self.generation(text, tokens, lps, finish_reason(c.finish_reason, cut is not None),
                                            len(prompt_ids)))
            result.append(gens)
        return result

    def sync_weights(self, named_tensors) -> None:
        """Replace the engine's weights with the trainer's (full, unsharded tensors with HF names, read
        lazily and loaded in buckets cast to the engine's dtype: `buckets`), then drop the prefix
        cache, whose KV the old weights computed. A sleeping engine wakes in two
        steps around the load, as TRL's colocate mode does: its weights first, then its KV cache
        only once the new weights are in, so the KV cache's memory (most of rl.vllm_memory) is not
        taken back while the load still needs room. vLLM maps that memory outside PyTorch's
        allocator, so the caller frees the update's gradients and PyTorch's cache before calling
        (rl/module.py: sync_engine). One function keeps the order: wake weights, load, reset, wake KV."""
        waking = self.asleep
        if waking:
            self.llm.wake_up(tags=[WEIGHTS])
        for bucket, last in buckets(named_tensors, self.dtype):  # streamed: one bucket at a time
            self.llm.collective_rpc(LOAD_METHOD, args=(bucket,), kwargs={"last": last})
        if self.llm.reset_prefix_cache() is False:
            raise RuntimeError("vLLM refused to reset its prefix cache after a weight sync (requests still running?); "
                               "its cached KV would come from the old weights")
        if waking:
            self.llm.wake_up(tags=[KV_CACHE])
            self.asleep = False

    def sleep(self) -> None:
        """Free the engine's GPU memory for the update: weights to the CPU, KV cache dropped (vLLM's
        sleep level 1); the next sync_weights wakes it before loading."""
        if not self.asleep:
            self.llm.sleep(level=1)
            self.asleep = True
