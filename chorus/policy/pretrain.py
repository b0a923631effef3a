"""Language-model pretraining of a tiny model on its world's corpus (issue 27: one shared base).

The paper's stages are small fine-tunes of one pretrained base; a tiny model trained from random
init by its first SFT stage has no such base, and merging its stages' weights breaks it. So the
tiny base is first trained as a plain causal LM (next-token loss on every token) on the texts of its
world: specs, briefs, RTL and stimulus of every strategy and quality of the training designs. The
loop is a plain torch one: packed blocks of the concatenated corpus, AdamW, linear warmup then cosine
decay, on whatever threads the caller set.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch


@dataclass(frozen=True)
class PretrainSpec:
    steps: int
    lr: float = 1e-3
    batch: int = 16  # blocks per step
    seq_len: int = 256  # tokens per block
    warmup: int = 20  # steps of linear warmup
    weight_decay: float = 0.01

    def to_dict(self) -> dict:
        return asdict(self)


def pack(tokenizer, texts: list[str], seq_len: int) -> torch.Tensor:
    """The texts tokenized and concatenated, each followed by <|endoftext|> (the raw-text end
    marker), cut into blocks of seq_len tokens (the remainder dropped): blocks x seq_len."""
    eos = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    ids: list[int] = []
    for text in texts:
        ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
        ids.append(eos)
    n = len(ids) // seq_len
    if n == 0:
        raise ValueError(f"the pretraining corpus has {len(ids)} tokens, fewer than one block of {seq_len}")
    return torch.tensor(ids[: n * seq_len], dtype=torch.long).view(n, seq_len)


def lr_at(step: int, spec: PretrainSpec) -> float:
    """Linear warmup to spec.lr over spec.warmup steps, then cosine decay to 10 % at the last step."""
    if step < spec.warmup:
        return spec.lr * (step + 1) / spec.warmup
    t = (step - spec.warmup) / max(1, spec.steps - spec.warmup)
    return spec.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, t))))


def pretrain(model, blocks: torch.Tensor, spec: PretrainSpec, seed: int = 0, on_step=None) -> list[float]:
    """spec.steps AdamW steps of next-token loss on random batches of `blocks`; returns each step's
    loss. The order of batches is drawn from `seed`, so a build is repeatable on one machine.
    `on_step(done, total)` hears each finished step (progress)."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=spec.weight_decay)
    model.train()
    losses = []
    for step in range(spec.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, spec)
        idx = torch.randint(0, len(blocks), (min(spec.batch, len(blocks)),), generator=gen)
        batch = blocks[idx]
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        if on_step:
            on_step(step + 1, spec.steps)
    model.eval()
    return losses
