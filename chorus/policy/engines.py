"""Generation engines behind one interface: prompts in, completions with token ids and
per-token log-probabilities out (trainers use both).

`hf`: transformers `generate` (batched, KV cache, sampling parameters, stop once a fenced block
closes; `generation` picks shared-prefix, plain or static-cache compiled decoding, policy/hf_generation.py).
`vllm`: the same interface on vLLM for GPUs, optional, in vllm_engine.py (vllm>=0.10.2, public API
only; `sync_weights` loads the trainer's weights, then resets vLLM's prefix cache). When the model
sits on the CPU the HF engine uses one torch thread by default, so a simulator process can use the
other core; on an accelerator it leaves torch's threads alone (`generation_threads`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .fence_stop import fence_closed
from .stops import eos_ids, first_stop


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 512
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int = 0


@dataclass
class Generation:
    text: str
    token_ids: list[int]
    logprobs: list[float]  # of each sampled token under the sampling distribution
    finish_reason: str  # stop (fence closed) | eos | length (hit max_new_tokens)
    prompt_tokens: int = 0
    meta: dict = field(default_factory=dict)


def generation_threads(device, threads: int | None) -> int | None:
    """The torch thread count to set before generating on `device`: `threads` for CPU generation,
    None (leave torch alone) on an accelerator or when `threads` is unset."""
    return threads if threads and torch.device(device).type == "cpu" else None


class HFEngine:
    # generate's on_group(i, samples) is called as each prompt's samples finish, before generate returns
    # (under generation=shared; after the batch otherwise): rollouts score a group while the rest decode
    streams_groups = True

    def __init__(self, model, tokenizer, threads: int | None = 1, generation: str = "shared",
                 compile: bool | None = None, stop_ids: tuple[int, ...] | None = None):
        # The device is read at each generate call, not here: a trainer moves the model after the
        # engine is made (onto the GPU at fit start, back to the CPU at teardown). `generation`:
        # shared | plain | static | auto (rl.generation, policy.generation); `compile` forces or forbids
        # compiling the static path (None: transformers compiles it on CUDA only).
        from .hf_generation import resolve_mode

        resolve_mode(generation, "cpu")  # a bad mode fails here, not at the first rollout
        self.model, self.tok, self.threads = model, tokenizer, threads
        self.generation, self.compile = str(generation), compile
        # every EOS id the model's generation config lists, as vLLM stops (policy/stops.py)
        self.stops = tuple(stop_ids) if stop_ids else eos_ids(tokenizer, getattr(model, "generation_config", None))
        self._apply_threads()

    def _apply_threads(self) -> None:
        n = generation_threads(next(self.model.parameters()).device, self.threads)
        if n and torch.get_num_threads() != n:
            torch.set_num_threads(n)

    @torch.no_grad()
    def generate(self, prompts: list[str], n: int = 1, params: SamplingParams = SamplingParams(),
                 on_group=None) -> list[list[Generation]]:
        """`n` samples for each prompt; result[i][j] is sample j of prompt i. `on_group(i, result[i])`
        is called once per prompt, as soon as its samples are done (streams_groups)."""
        results, streamed = self._generate(prompts, n, params, on_group)
        if on_group is not None and not streamed:  # the batch paths: every group once the batch is done
            for i, group in enumerate(results):
                on_group(i, group)
        return results

    def _generate(self, prompts: list[str], n: int, params: SamplingParams, on_group) -> tuple[list, bool]:
        """(result, whether on_group was already called for every prompt)."""
        from transformers import StoppingCriteriaList

        from .hf_generation import (FenceCriteria, cache_kwarg, decode_kwargs, resolve_mode, sampling_processors,
                                    shared_prefix_cache)
        from .shared_decode import loop_applies, shared_decode

        self._apply_threads()
        tok, device = self.tok, next(self.model.parameters()).device
        mode = resolve_mode(self.generation, device)
        if mode == "shared" and loop_applies(self.model):
            groups: list = [None] * len(prompts)

            def done(i: int, tokens, logprobs, prompt_lens) -> None:
                groups[i] = [self._generation(tokens[r], logprobs[r], prompt_lens[r]) for r in range(i * n, (i + 1) * n)]
                if on_group is not None:
                    on_group(i, groups[i])

            shared_decode(self.model, tok, prompts, n, params, self.stops, on_prompt_done=done)
            return groups, True
        expanded = [p for p in prompts for _ in range(n)]
        batch = tok(expanded, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        width = batch["input_ids"].shape[1]
        stop = StoppingCriteriaList([FenceCriteria(tok, len(expanded), width, device)])
        extra = decode_kwargs(mode, device, self.compile)
        if mode == "shared":  # a generation_config the loop cannot honour: generate, on the shared prefix
            once = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
            if (cache := shared_prefix_cache(self.model, once["input_ids"], once["attention_mask"], n)) is not None:
                extra[cache_kwarg(self.model)] = cache
        torch.manual_seed(params.seed)
        sample = params.temperature > 0
        # The sampled tokens' log-probs come from SampledLogprobs (one [rows, vocab] buffer), not from
        # output_scores (one per step); the warpers are ours, so generate is told to add none.
        procs = sampling_processors(params.temperature if sample else 1.0, params.top_k if sample else 0,
                                    params.top_p if sample else 1.0)
        out = self.model.generate(
            **batch, max_new_tokens=params.max_new_tokens, do_sample=sample, temperature=1.0, top_p=1.0, top_k=0,
            use_cache=True, pad_token_id=tok.pad_token_id, eos_token_id=list(self.stops), stopping_criteria=stop,
            logits_processor=procs, return_dict_in_generate=True, **extra)
        scores = procs[-1].finish(out.sequences)
        prompt_lens = batch["attention_mask"].sum(1).tolist()
        results = []
        for new, lp, prompt_len in zip(out.sequences[:, width:].tolist(), scores, prompt_lens):  # one copy each
            keep = len(new)
            while keep and new[keep - 1] == tok.pad_token_id and tok.pad_token_id not in self.stops:
                keep -= 1
            keep = first_stop(new[:keep], self.stops) or keep
            results.append(self._generation(new[:keep], lp[:keep], prompt_len))
        return [results[i * n:(i + 1) * n] for i in range(len(prompts))], False

    def _generation(self, new: list[int], logprobs: list[float], prompt_len: int) -> Generation:
        """A row's completion (ending at its EOS when it has one) as a Generation."""
        text = self.tok.decode(new, skip_special_tokens=True)
        ended_eos = bool(new) and new[-1] in self.stops
        reason = "eos" if ended_eos else ("stop" if fence_closed(text) else "length")
        return Generation(text, new, [float(x) for x in logprobs], reason, prompt_len)


def make_engine(kind: str, model, tokenizer, path: str | None = None, dtype: str = "bfloat16", seed: int = 0,
                threads: int | None = 1, generation: str = "shared", gpu_memory: float | None = None,
                **vllm_options):
    """`gpu_memory`: vLLM's share of the GPU (None: the engine's default for a GPU of its own);
    `vllm_options`: vllm_engine.llm_kwargs' max_model_len, max_num_seqs, distributed and sleep."""
    if kind == "hf":
        return HFEngine(model, tokenizer, threads=threads, generation=generation)
    if kind == "vllm":
        if not path:
            raise ValueError("engine=vllm needs the model's path or id")
        from .vllm_engine import VLLMEngine

        memory = {} if gpu_memory is None else {"gpu_memory": gpu_memory}
        return VLLMEngine.open(path, tokenizer, dtype=dtype, seed=seed, generation=Generation, **memory, **vllm_options)
    if kind == "openai":
        raise ValueError("engine=openai is built from policy.api_* settings by chorus.evaluate (open_openai_engine)")
    raise ValueError(f"unknown engine {kind!r}; choose hf, vllm or openai")
