"""Tiny Qwen3-style models built locally, so every code path runs on a CPU without a model hub.

`build_tiny` trains a byte-level BPE tokenizer on a corpus, initialises a small Qwen3 causal LM
from a seed and saves both with `save_pretrained`; later code loads the directory exactly like a
real checkpoint (`AutoModelForCausalLM.from_pretrained(path)` / `AutoTokenizer.from_pretrained`).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from ..tracking.progress import Progress, throttled

# Qwen3Config kwargs. `s` is the design-card model (~3.4M parameters). head_dim is explicit because
# Qwen3 does not derive it from hidden/heads; tied embeddings keep the vocabulary from dominating.
PRESETS: dict[str, dict] = {
    "xs": dict(vocab_size=1024, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
               num_key_value_heads=1, head_dim=64, intermediate_size=344),
    "s": dict(vocab_size=2048, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2, head_dim=64, intermediate_size=688),
    "m": dict(vocab_size=4096, hidden_size=384, num_hidden_layers=6, num_attention_heads=6,
              num_key_value_heads=2, head_dim=64, intermediate_size=1024),
}
_COMMON = dict(tie_word_embeddings=True, max_position_embeddings=4096, rms_norm_eps=1e-6,
               rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
# Fixed ids 0..3: the trainer assigns special tokens first, in this order.
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
READY = "CHORUS_READY"  # written last: a directory without it is not a model


def _check_size(size: str) -> dict:
    if size not in PRESETS:
        raise ValueError(f"unknown tiny model size {size!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[size]


def default_corpus(extra_texts: list[str] | None = None) -> list[str]:
    """Spec, RTL and reference testbench of every bundled task, then spec, brief, RTL and stimulus
    (vectors and body) of the default generated tasks, in a fixed order; then extra_texts."""
    from ..tasks import load_bundled
    from ..tasks.generated import generate_tasks

    texts: list[str] = []
    for task in load_bundled():
        texts.append(task.spec)
        texts.extend(task.rtl[name] for name in sorted(task.rtl))
        if task.reference_tb:
            texts.append(task.reference_tb)
    for task in generate_tasks(seed=0, per_family=8, difficulty="medium"):
        texts += design_texts(task, [task.meta["programs"][g] for g in ("strong", "medium", "compact")])
    return texts + list(extra_texts or [])


def design_texts(task, programs: list[str]) -> list[str]:
    """A generated design's spec, brief (prompts carry it when the spec does not fit) and RTL, then
    each of `programs` (vectors text) as it is and as body statements."""
    from ..stimulus.aliases import alias_map
    from ..stimulus.formats import render
    from ..stimulus.program import parse_vectors

    amap = alias_map(task)
    texts = [task.spec, task.brief, *(task.rtl[name] for name in sorted(task.rtl))]
    for vectors in programs:
        texts += [vectors, render("body", task, parse_vectors(vectors, amap))]
    return texts


def corpus_hash(corpus: list[str]) -> str:
    return hashlib.sha256(json.dumps(list(corpus)).encode()).hexdigest()[:12]


def train_tokenizer(corpus: list[str], vocab_size: int):
    """Byte-level BPE (GPT-2/Qwen style): any byte string encodes, so decode(encode(x)) == x."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    # The full 256-byte alphabet even if the corpus lacks some bytes, so nothing maps to <unk>.
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus, trainer=trainer)
    # Qwen3's convention: <|im_end|> ends a (chat) generation; no BOS is prepended to inputs.
    # clean_up_tokenization_spaces would rewrite " ," etc. and break the round trip on code.
    # model_input_names as Qwen's tokenizer has them: transformers before 5 otherwise adds
    # token_type_ids to every encoding, which generate() refuses ("not used by the model").
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|im_end|>",
        pad_token="<|pad|>", unk_token=None, chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False, model_max_length=_COMMON["max_position_embeddings"],
        model_input_names=["input_ids", "attention_mask"])


def world_corpus(seed: int = 0, per_family: int = 48) -> list[str]:
    """What the staged world's base model is pretrained on: spec, brief, RTL and every stimulus program
    (each grade and each strategy, as vectors and as body statements) of the *training* designs of
    the mixed world (tasks.difficulty=mixed), in a fixed order. Validation and test designs stay out."""
    from ..tasks.generated import MIXED, generate_tasks

    texts: list[str] = []
    for task in generate_tasks(seed=seed, per_family=per_family, difficulty=MIXED):
        if task.split == "train":
            programs = {**task.meta["programs"], **task.meta.get("strategies", {})}
            texts += design_texts(task, [programs[name] for name in sorted(programs)])
    return texts


def _build_into(path: Path, size: str, seed: int, corpus: list[str], chash: str,
                pretrain: tuple | None = None) -> None:
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    preset = _check_size(size)
    tokenizer = train_tokenizer(corpus, preset["vocab_size"])
    if len(tokenizer) > preset["vocab_size"]:  # never expected: specials count toward vocab_size
        raise RuntimeError(f"tokenizer has {len(tokenizer)} tokens > vocab_size {preset['vocab_size']}")
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    config = Qwen3Config(**preset, **_COMMON, bos_token_id=ids["<|endoftext|>"],
                         eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|pad|>"])
    torch.manual_seed(seed)  # weight init is the only randomness; the tokenizer depends on the corpus
    model = Qwen3ForCausalLM(config)
    # Stop on either end marker: <|im_end|> after a chat turn, <|endoftext|> after raw text.
    model.generation_config = GenerationConfig(
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]], pad_token_id=ids["<|pad|>"])
    trained = {}
    if pretrain is not None:  # (PretrainSpec, its corpus, the corpus's hash)
        from .pretrain import pack, pretrain as run_pretrain

        spec, texts, phash = pretrain
        blocks = pack(tokenizer, texts, spec.seq_len)
        losses = run_pretrain(model, blocks, spec, seed=seed,
                              on_step=throttled(Progress(None).update, "pretraining the tiny base"))
        trained = {"pretrain": spec.to_dict(), "pretrain_corpus_hash": phash, "pretrain_blocks": len(blocks),
                   "pretrain_loss_first": losses[0], "pretrain_loss_last": losses[-1]}
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    n_params = sum(p.numel() for p in model.parameters())  # parameters() counts tied weights once
    meta = {"size": size, "seed": seed, "corpus_hash": chash, "corpus_texts": len(corpus),
            "params": n_params, "preset": preset, "tokenizer_vocab": len(tokenizer), **trained}
    (path / "chorus_tiny.json").write_text(json.dumps(meta, indent=1) + "\n")
    (path / READY).write_text("ok\n")


def _reuse(path: Path, size: str, seed: int, chash: str, pretrain: tuple | None = None) -> Path:
    """A complete directory is reused only if it was built from the same recipe."""
    meta = json.loads((path / "chorus_tiny.json").read_text())
    want = {"size": size, "seed": seed, "corpus_hash": chash, "preset": PRESETS[size],
            "pretrain": pretrain[0].to_dict() if pretrain else None,
            "pretrain_corpus_hash": pretrain[2] if pretrain else None}
    got = {k: meta.get(k) for k in want}
    if got != want:
        raise ValueError(f"{path} holds a different tiny model ({got}); delete it or pick another out_dir")
    return path


def build_tiny(size: str = "s", seed: int = 0, corpus: list[str] | None = None,
               out_dir: str | Path | None = None, cache_root: str | Path | None = None,
               pretrain_steps: int = 0, pretrain_corpus: list[str] | None = None) -> Path:
    """Build (or reuse) a tiny model directory; returns its path.

    Default location: <cache_root>/models/tiny-<size>-seed<seed>-<corpus-hash12>[-pt<steps>-<hash8>],
    cache_root from chorus.sim.cache.default_cache_root() ($CHORUS_CACHE_DIR). Built in a sibling temp
    dir and renamed into place, so a concurrent reader or builder never sees half a model.
    pretrain_steps > 0: the initialised model is then pretrained as a language model
    (chorus.policy.pretrain) on `pretrain_corpus` (default: world_corpus(), the staged world's
    training designs), a base that SFT stages fine-tune.
    """
    _check_size(size)
    corpus = default_corpus() if corpus is None else list(corpus)
    if not corpus:
        raise ValueError("build_tiny needs a non-empty corpus to train the tokenizer")
    if pretrain_steps < 0:
        raise ValueError(f"model.pretrain_steps must be >= 0, got {pretrain_steps}")
    chash = corpus_hash(corpus)
    pretrain = None
    if pretrain_steps:
        from .pretrain import PretrainSpec

        texts = world_corpus() if pretrain_corpus is None else list(pretrain_corpus)
        spec = PretrainSpec(steps=int(pretrain_steps))
        pretrain = (spec, texts, corpus_hash([json.dumps(spec.to_dict()), *texts]))
    if out_dir is None:
        from ..sim.cache import default_cache_root

        root = Path(cache_root).expanduser() if cache_root else default_cache_root()
        tag = f"-pt{pretrain_steps}-{pretrain[2][:8]}" if pretrain else ""
        # the name tracking/record.tiny_model_name reads back
        out_dir = root / "models" / f"tiny-{size}-seed{seed}-{chash}{tag}"
    final = Path(out_dir)
    if (final / READY).exists():
        return _reuse(final, size, seed, chash, pretrain)
    if final.exists() and any(final.iterdir()):
        raise ValueError(f"{final} exists but is not a complete chorus tiny model; delete it or pick another out_dir")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.tmp-"))
    try:
        _build_into(tmp, size, seed, corpus, chash, pretrain)
        try:
            if final.exists():
                final.rmdir()  # empty (checked above); rename onto a non-empty dir would fail anyway
            os.rename(tmp, final)  # atomic on one filesystem
        except OSError:
            if not (final / READY).exists():  # lost the race to another builder: use theirs
                raise
        return _reuse(final, size, seed, chash, pretrain)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_tiny(size: str = "s", seed: int = 0, corpus: list[str] | None = None,
              path: str | Path | None = None, cache_root: str | Path | None = None,
              dtype: str = "float32", device: str = "cpu", attn_implementation: str = "sdpa",
              pretrain_steps: int = 0):
    """Build-or-load, then (model, tokenizer) through the same from_pretrained calls as any checkpoint.

    Arguments mirror conf/model/tiny.yaml: path=None builds/caches automatically; a path is loaded as is.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _check_size(size)
    path = Path(path) if path else build_tiny(size, seed, corpus, cache_root=cache_root, pretrain_steps=pretrain_steps)
    # local_files_only: a local directory never needs the hub, and this guarantees no download.
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=getattr(torch, dtype),
                                                 attn_implementation=attn_implementation).to(device)
    return model, tokenizer
