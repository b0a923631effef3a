"""Load any causal LM and tokenizer (Hugging Face id or local path), the tiny presets, LoRA.

Only this module and the engines touch transformers' model classes; callers get plain objects.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
           "float16": torch.float16, "fp16": torch.float16}


class ModelLoadError(ValueError):
    """The model or tokenizer cannot be used; the message names the fix."""


def resolve_path(name: str = "tiny", path: str | None = None, size: str = "s", seed: int = 0,
                 pretrain_steps: int = 0, **_) -> str:
    """`model=tiny` builds (or finds) the cached tiny checkpoint (pretrained on its world's corpus
    when pretrain_steps > 0); anything else is an id or path."""
    if name == "tiny" and not path:
        from .tiny import build_tiny

        return str(build_tiny(size, seed=seed, pretrain_steps=pretrain_steps))
    if not path:
        raise ModelLoadError("model.path is empty; pass model.path=<local dir or Hugging Face id>")
    p = Path(path).expanduser()
    if p.exists():
        return str(p)
    if path.startswith((".", "/", "~")) or path.count("/") != 1:
        raise ModelLoadError(f"model path {path} does not exist; pass an existing directory or a Hugging Face id")
    return path  # a hub id; loading fails clearly below if it is not reachable


def load_model(name: str = "tiny", path: str | None = None, size: str = "s", seed: int = 0, dtype: str = "float32",
               device: str = "cpu", attn_implementation: str | None = "sdpa", lora: dict | None = None,
               pretrain_steps: int = 0, **_):
    """(model, tokenizer) ready for generation, in eval mode, on `device`."""
    from transformers import AutoModelForCausalLM

    where = resolve_path(name, path, size, seed, pretrain_steps)
    if dtype not in _DTYPES:
        raise ModelLoadError(f"unknown dtype {dtype!r}; use one of {sorted(_DTYPES)}")
    tok = load_tokenizer(where)
    try:
        kwargs = {"dtype": _DTYPES[dtype]}
        if attn_implementation:
            kwargs["attn_implementation"] = attn_implementation
        model = AutoModelForCausalLM.from_pretrained(where, local_files_only=Path(where).exists(), **kwargs)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load model {where}: {_first_line(exc)}") from None
    if lora:
        model = add_lora(model, **lora)
    return model.to(device).eval(), tok


def load_tokenizer(where: str):
    """The tokenizer of a local path or hub id, as load_model gives it (no weights loaded): EOS
    required, EOS as padding when it has none, padded on the left for batched generation."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(where, local_files_only=Path(where).exists())
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load model {where}: {_first_line(exc)}") from None
    if tok.eos_token_id is None:
        raise ModelLoadError(f"tokenizer of {where} has no EOS token; set eos_token in its tokenizer_config.json")
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"  # decoder-only batched generation
    return tok


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def add_lora(model, r: int = 8, alpha: int = 16, dropout: float = 0.0, target_modules: list[str] | None = None, **_):
    from peft import LoraConfig, get_peft_model

    cfg = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, task_type="CAUSAL_LM",
                     target_modules=target_modules or ["q_proj", "k_proj", "v_proj", "o_proj"])
    return get_peft_model(model, cfg)


def lora_merged_weight(layer) -> torch.Tensor:
    """One LoRA-adapted layer's base weight plus each active adapter's delta (peft's get_delta_weight,
    the very delta merge_adapter adds), in fp32 and outside autocast: a sync runs inside the training
    step's bf16 autocast, which would compute the delta B A x scale in bf16 and round the small update
    it carries. Rounded once, by whoever stores it (the engine's or the copy's dtype)."""
    if any(layer.use_dora.get(a) for a in layer.active_adapters):
        raise ValueError("a DoRA adapter cannot be synced as a plain delta; train plain LoRA (use_dora off)")
    weight = layer.get_base_layer().weight
    with torch.no_grad(), torch.autocast(weight.device.type, enabled=False):
        return weight.float() + sum(layer.get_delta_weight(a).float() for a in layer.active_adapters)


def merged_lora_weights(model):
    """A peft LoRA model's weights as the plain model it stands for, one tensor at a time, under the base
    model's Hugging Face names (no base_model.model. prefix, no .base_layer, no lora_ tensors): each
    adapted layer's weight is lora_merged_weight's (fp32); the other tensors are the model's own.

    Computed out of place rather than by merge_adapter then unmerge_adapter: that adds the delta to
    the frozen base and subtracts it again, rounding twice at every sync (coarsely over a bf16 base),
    so the base the adapter trains on would drift; here the trainer's model is only read."""
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    adapted = {f"{name}.base_layer.weight": layer for name, layer in base.named_modules() if isinstance(layer, LoraLayer)}
    for key, tensor in base.state_dict().items():
        if ".lora_" not in key:
            yield key.replace(".base_layer.", "."), lora_merged_weight(adapted[key]) if key in adapted else tensor


def export_merged(model, tokenizer, out_dir: str | Path, dtype: str | None = None) -> Path:
    """Save plain Hugging Face weights, in the model's own precision or, given `dtype`, in that one.
    A full model itself is not cast: its fp32 masters may still be evaluated. A LoRA model is merged
    in place (peft's merge_and_unload) after its base is cast to fp32, so the export is fp32 unless
    `dtype` says otherwise."""
    out = Path(out_dir)
    if hasattr(model, "merge_and_unload"):
        # merged in fp32: over a bf16 base the adapter's delta would be rounded to the base's bf16
        # steps, and merges need that small task vector
        model = model.float().merge_and_unload()
    if dtype is None or _DTYPES[dtype] == model.dtype:
        model.save_pretrained(out)
    else:  # cast a copy of the tensors only; config.json would still name the model's dtype, so fix it
        cast: dict[int, torch.Tensor] = {}  # one copy per storage, so tied weights stay tied (saved once)
        state = {k: cast.setdefault(v.data_ptr(), v.to(_DTYPES[dtype])) for k, v in model.state_dict().items()}
        model.save_pretrained(out, state_dict=state)
        cfg = json.loads((out / "config.json").read_text())
        cfg["dtype"] = str(_DTYPES[dtype]).removeprefix("torch.")
        (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    tokenizer.save_pretrained(out)
    return out


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype a dtype setting names (float32, bf16, ...)."""
    if name not in _DTYPES:
        raise ModelLoadError(f"unknown dtype {name!r}; use one of {sorted(_DTYPES)}")
    return _DTYPES[name]


def check_dtype(dtype: str | None, key: str) -> None:
    if dtype is not None and dtype not in _DTYPES:
        raise ValueError(f"{key}={dtype!r} is not a dtype; use one of {sorted(_DTYPES)}")
