"""Tokenise SFT examples: the chat-formatted prompt is context, only the completion is learned."""
from __future__ import annotations

import torch

from ..policy.prompts import render_messages
from .data import Example


def encode(tokenizer, example: Example, max_tokens: int) -> dict | None:
    """input_ids and labels (-100 on the prompt); None when the example does not fit."""
    prompt = tokenizer(render_messages(tokenizer, example.messages), add_special_tokens=False)["input_ids"]
    target = tokenizer(example.completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    if len(prompt) + len(target) > max_tokens:
        return None
    return {"input_ids": prompt + target, "labels": [-100] * len(prompt) + target}


class Collator:
    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, rows: list[dict]) -> dict:
        width = max(len(r["input_ids"]) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            n = len(r["input_ids"])
            ids[i, :n] = torch.tensor(r["input_ids"])
            labels[i, :n] = torch.tensor(r["labels"])
            mask[i, :n] = 1
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}
