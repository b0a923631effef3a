"""Streaming merges of Hugging Face checkpoints: one tensor at a time (large tensors in blocks of
rows), written shard by shard with safetensors, so peak memory stays near one model's size."""
from __future__ import annotations

import hashlib
import json
import shutil
import zlib
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from .methods import (MERGES, NEEDS_BASE, WEIGHTED_MEANS, check_density, check_weight_sum, merge_weights,
                      trim_threshold)

ARCH_KEYS = ("model_type", "architectures", "hidden_size", "num_hidden_layers", "num_attention_heads",
             "num_key_value_heads", "intermediate_size", "vocab_size", "tie_word_embeddings")
SIDE_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
              "special_tokens_map.json", "vocab.json", "merges.txt", "chat_template.jinja")


class Checkpoint:
    """Lazy tensor access to a checkpoint's safetensors files (single file or sharded index)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        index = self.path / "model.safetensors.index.json"
        if index.exists():
            self.where = json.loads(index.read_text())["weight_map"]
        elif (self.path / "model.safetensors").exists():
            with safe_open(self.path / "model.safetensors", "pt") as f:
                self.where = {k: "model.safetensors" for k in f.keys()}
        else:
            raise ValueError(f"{self.path} has no model.safetensors; merges need Hugging Face safetensors checkpoints")
        config = self.path / "config.json"
        self.config = json.loads(config.read_text()) if config.exists() else {}

    # Each read opens (maps) the file and closes it again: a mapping kept open would keep every page
    # read so far resident, and the process would grow to the size of all experts together.
    def shape(self, name: str) -> list[int]:
        with safe_open(self.path / self.where[name], "pt") as f:
            return list(f.get_slice(name).get_shape())

    def rows(self, name: str, start: int, stop: int) -> torch.Tensor:
        with safe_open(self.path / self.where[name], "pt") as f:
            return f.get_slice(name)[start:stop].clone()

    def tensor(self, name: str) -> torch.Tensor:
        with safe_open(self.path / self.where[name], "pt") as f:
            return f.get_tensor(name).clone()


def validate(checkpoints: list[Checkpoint]) -> None:
    """Same architecture, tensor names and shapes, and tokenizer; else a clear error."""
    first = checkpoints[0]
    for c in checkpoints[1:]:
        for key in ARCH_KEYS:
            if c.config.get(key) != first.config.get(key):
                raise ValueError(f"cannot merge {c.path} with {first.path}: config {key} differs "
                                 f"({c.config.get(key)} vs {first.config.get(key)}); merge experts of one architecture")
        if set(c.where) != set(first.where):
            extra = sorted(set(c.where) ^ set(first.where))[:3]
            raise ValueError(f"cannot merge {c.path} with {first.path}: different tensors (e.g. {extra})")
        for name in first.where:
            if c.shape(name) != first.shape(name):
                raise ValueError(f"cannot merge {c.path} with {first.path}: {name} has shape {c.shape(name)} vs "
                                 f"{first.shape(name)}")
        if _tokenizer_digest(c.path) != _tokenizer_digest(first.path):
            raise ValueError(f"cannot merge {c.path} with {first.path}: their tokenizers differ")


def _tokenizer_digest(path: Path) -> str | None:
    for f in ("tokenizer.json", "vocab.json"):
        if (path / f).exists():
            return hashlib.sha256((path / f).read_bytes()).hexdigest()
    return None


def check_merge(method: str, experts: list[str | Path], base: str | Path | None = None,
                weights: list[float] | None = None, options: dict | None = None):
    """Refuse a merge that cannot work (method, weights, density, mismatched checkpoints) from the
    arguments and the checkpoints' headers alone; returns the opened (experts, base)."""
    if method not in MERGES:
        raise ValueError(f"unknown merge {method!r}; choose one of {sorted(MERGES)}")
    if method in NEEDS_BASE and base is None:
        raise ValueError(f"{method} merges task vectors and needs a base checkpoint (the SFT init)")
    w = merge_weights(weights, len(experts))  # refuse bad arguments before reading any tensor
    if method in WEIGHTED_MEANS and (options or {}).get("normalize", True):
        check_weight_sum(w)
    if "density" in (options or {}):
        check_density(options["density"])
    cks = [Checkpoint(p) for p in experts]
    b = Checkpoint(base) if base is not None and method in NEEDS_BASE else None
    validate(cks + ([b] if b else []))
    return cks, b


def merge_checkpoints(method: str, experts: list[str | Path], out_dir: str | Path, base: str | Path | None = None,
                      weights: list[float] | None = None, seed: int = 0, shard_bytes: int = 256 << 20,
                      block_rows: int = 4096, **options) -> dict:
    """Merge `experts` with `method` (see MERGES) into a Hugging Face directory at out_dir."""
    cks, b = check_merge(method, experts, base, weights, options)
    out = Path(out_dir)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    fn = MERGES[method]
    shard, shard_size, weight_map, n_shards, total = {}, 0, {}, 0, 0

    def flush():
        nonlocal shard, shard_size, n_shards
        if shard:
            n_shards += 1
            name = f"model-{n_shards:05d}.safetensors"
            save_file(shard, str(tmp / name), metadata={"format": "pt"})
            weight_map.update({k: name for k in shard})
            shard, shard_size = {}, 0

    for name in cks[0].where:  # in the first expert's order
        shape = cks[0].shape(name)
        rows = shape[0] if shape else 1
        gen = torch.Generator().manual_seed(zlib.crc32(f"{seed}:{name}".encode()))
        extra = dict(options)
        if method == "ties":  # the trim cut is a property of the whole tensor, not of a block
            base_t = b.tensor(name).float()
            extra["thresholds"] = [trim_threshold(c.tensor(name).float() - base_t, options.get("density", 0.2))
                                   for c in cks]
            del base_t
        blocks = []
        for start in range(0, rows, block_rows) if shape else [0]:
            stop = min(rows, start + block_rows)
            get = (lambda c: c.rows(name, start, stop)) if shape else (lambda c: c.tensor(name))
            experts_t = [get(c) for c in cks]
            blocks.append(fn(experts_t, get(b) if b else None, weights=weights, generator=gen, **extra)
                          .to(experts_t[0].dtype))
        merged = torch.cat(blocks) if shape else blocks[0]
        shard[name] = merged.contiguous()
        shard_size += merged.numel() * merged.element_size()
        total += merged.numel() * merged.element_size()
        if shard_size >= shard_bytes:
            flush()
    flush()
    if n_shards == 1:
        (tmp / "model-00001.safetensors").rename(tmp / "model.safetensors")
    else:
        (tmp / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    src = cks[0].path
    for f in SIDE_FILES:
        if (src / f).exists():
            shutil.copy(src / f, tmp / f)
    info = {"method": method, "experts": [str(p) for p in experts], "base": str(base) if b else None,
            "weights": weights, "seed": seed, "options": options, "shards": n_shards}
    (tmp / "merge.json").write_text(json.dumps(info, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return {**info, "checkpoint": str(out)}
