"""The token ids a completion ends at, one rule for every engine.

A model's generation config may list several EOS ids (Qwen3: <|im_end|> after a chat turn and
<|endoftext|> after raw text; chorus's tiny models too), while its tokenizer names one. vLLM stops at
every id the generation config lists; HF's engine stopped at the tokenizer's one, so the SFT stages'
and merges' tables (HF) and the experts' (vLLM) were scored under different stop rules. Both engines
now take this list."""
from __future__ import annotations


def eos_ids(tokenizer, generation_config=None) -> tuple[int, ...]:
    """The tokenizer's EOS id, then every id `generation_config.eos_token_id` lists (an id or a list),
    each once, in that order."""
    listed = getattr(generation_config, "eos_token_id", None) if generation_config is not None else None
    listed = listed if isinstance(listed, (list, tuple)) else [listed]
    ids = [getattr(tokenizer, "eos_token_id", None), *listed]
    return tuple(dict.fromkeys(int(i) for i in ids if i is not None))


def saved_generation_config(path: str):
    """The generation config saved beside a checkpoint (None where it has none)."""
    from transformers import GenerationConfig

    try:
        return GenerationConfig.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError):  # no generation_config.json there
        return None


def checkpoint_eos_ids(tokenizer, path: str) -> tuple[int, ...]:
    """eos_ids for the checkpoint at `path` (a dir or a cached hub id), as an engine serving it stops."""
    return eos_ids(tokenizer, saved_generation_config(path))


def first_stop(token_ids: list[int], stops: tuple[int, ...]) -> int | None:
    """The number of tokens up to and including the first stop id, or None."""
    return next((k + 1 for k, t in enumerate(token_ids) if t in stops), None)
