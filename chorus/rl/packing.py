"""Packed (unpadded) update passes: a micro-batch's right-padded rows concatenated into one row.

A right-padded micro-batch computes rows x longest-row tokens, padding included, and its attention
mask keeps flash attention off its varlen kernels. transformers reads one row with `position_ids`
that restart at 0 for each sequence, and no attention mask, as packed sequences (masking_utils.
find_packed_sequence_indices): a block-diagonal causal mask under sdpa, eager and flex attention,
the varlen kernels under flash attention. Each token then sees the same tokens at the same positions
as in its padded row, so the packed pass gives the padded pass's log-probs (tests/test_packing.py).

What a packed pass costs depends on the attention kernel: flash (varlen) and flex (block-sparse)
attention compute each sequence's own block, so packing never computes more than padding; sdpa and
eager score all N x N token pairs of a pack of N tokens (the mask only zeroes them), against rows x
longest^2 padded. `should_pack` packs there only when N^2 <= rows x longest^2, where packing then
computes no more in either the layers (N <= rows x longest) or the attention.
"""
from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass

import torch

# attention implementations whose packed pass computes each sequence's own block only (substrings:
# flash_attention_2/3 and the hub's flash kernels run varlen; flex attention skips empty blocks)
PER_SEQUENCE_ATTENTION = ("flash", "flex_attention")
PROBE = (5, 7)  # the probe's two rows' lengths (tokens)


@dataclass
class Packed:
    """One micro-batch's rows as one row without padding."""
    ids: torch.Tensor  # [1, N] the rows' tokens, one after another
    position_ids: torch.Tensor  # [1, N] each token's position in its own row (0 at each row's start)
    select: torch.Tensor  # [N - 1] bool: the positions predicting a wanted token, in row-major order


def padded_tokens(lengths: list[int]) -> int:
    """Tokens a right-padded pass over rows of these lengths computes (rows x the longest)."""
    return len(lengths) * max(lengths, default=0)


def packed_tokens(lengths: list[int]) -> int:
    """Tokens a packed pass over rows of these lengths computes (the rows' own)."""
    return sum(lengths)


def row_lengths(attn: torch.Tensor) -> list[int] | None:
    """Each row's token count when every row is right-padded (its attention mask a prefix of ones);
    None otherwise (left padding or holes: those rows cannot be packed by their lengths alone)."""
    lengths = attn.sum(-1)
    prefix = torch.arange(attn.size(1), device=attn.device)[None] < lengths[:, None]
    return lengths.tolist() if bool((attn.bool() == prefix).all()) else None


def pack_rows(ids: torch.Tensor, attn: torch.Tensor, mask: torch.Tensor) -> Packed:
    """The rows of right-padded ids [B, T] (attention mask attn, wanted tokens mask) as one row;
    `select` keeps, in the padded select's order (mask[:, 1:] row by row), the positions that predict
    a wanted token of their own row, never a row's last token (it would predict the next row's first)."""
    lengths = row_lengths(attn)
    if lengths is None:
        raise ValueError("packing needs right-padded rows (each attention mask a prefix of ones); "
                         "set trainer.pack_sequences=false")
    keep = attn.bool()
    if bool((mask.bool() & ~keep).any()):
        raise ValueError("a wanted token lies in a row's padding (mask outside the attention mask); "
                         "fix the batch's masks or set trainer.pack_sequences=false")
    positions = torch.cat([torch.arange(n, device=ids.device) for n in lengths])
    wanted = mask.bool()[keep]  # row-major, like the padded select
    starts = positions == 0
    return Packed(ids[keep][None], positions[None], wanted[1:] & ~starts[1:])


def _config(model):
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft wraps the HF model
    return getattr(base, "config", None)


def why_not_packable(model) -> str | None:
    """Why the model's forward does not separate packed sequences, or None where it does: checked once
    per model on two rows (PROBE), whose second row packed must score as it does alone, against what
    it scores after the first row without a restart (the leak a pack that does not separate would have)."""
    if hasattr(model, "_chorus_pack_reason"):
        return model._chorus_pack_reason
    reason = _probe(model)
    with contextlib.suppress(AttributeError):  # a model that takes no attributes is probed each time
        model._chorus_pack_reason = reason
    return reason


def _probe(model) -> str | None:
    config = _config(model)
    if config is None or not hasattr(config, "_attn_implementation"):
        return "it is not a transformers model (no config with an attention implementation)"
    vocab = getattr(config.get_text_config(), "vocab_size", None)  # a multimodal config nests its text model's
    if not vocab:
        return "its config gives no vocabulary size"
    first, second = PROBE
    device = next(model.parameters()).device
    ids = torch.arange(1, first + second + 1, device=device)[None] % vocab
    positions = torch.cat([torch.arange(first), torch.arange(second)]).to(device)[None]
    training = model.training
    model.eval()  # no dropout; in the caller's autocast: flash kernels need its half precision
    try:
        with torch.no_grad():
            alone = model(input_ids=ids[:, first:], use_cache=False).logits.float()
            packed = model(input_ids=ids, position_ids=positions, use_cache=False).logits[:, first:].float()
            joined = model(input_ids=ids, use_cache=False).logits[:, first:].float()
    except TypeError as exc:  # a forward that takes no position_ids
        return f"its forward does not take position_ids ({exc})"
    finally:
        model.train(training)
    err, leak = float((packed - alone).abs().max()), float((joined - alone).abs().max())
    if not err <= 0.1 * leak:  # rounding is far below what attending across rows changes
        return (f"its {config._attn_implementation} attention does not separate packed rows (a packed row "
                f"moved {err:.3g}, attending across rows moves it {leak:.3g})")
    return None


def dense_attention(model) -> bool:
    """Whether the model's attention scores every token pair of a pack (sdpa, eager), rather than each
    sequence's own block (PER_SEQUENCE_ATTENTION)."""
    name = str(getattr(_config(model), "_attn_implementation", ""))
    return not any(kernel in name for kernel in PER_SEQUENCE_ATTENTION)


def should_pack(model, lengths: list[int] | None, setting: bool | None) -> bool:
    """Whether one pass over right-padded rows of these `lengths` (None: not right-padded) is packed,
    as trainer.pack_sequences says: false never; true always (refused where the model or the rows
    cannot be packed); null where the model packs and packing computes no more than padding."""
    if setting is False:
        return False
    reason = why_not_packable(model)
    if setting is True:
        if reason is not None:
            raise ValueError(f"trainer.pack_sequences=true, but {type(model).__name__} cannot be packed: {reason}; "
                             "set trainer.pack_sequences=null or false")
        return True
    if reason is not None:
        _say_once(model, reason)
        return False
    if lengths is None:
        return False
    if dense_attention(model):  # N^2 scores packed against rows x longest^2 padded (module docstring)
        return packed_tokens(lengths) ** 2 <= len(lengths) * max(lengths, default=0) ** 2
    return True


def pass_tokens(model, lengths: list[int], setting: bool | None) -> int:
    """Tokens one forward pass over rows of these lengths computes, packed or padded as should_pack
    decides: what rl.micro_tokens budgets."""
    packed = should_pack(model, lengths, setting)
    return packed_tokens(lengths) if packed else padded_tokens(lengths)


def _say_once(model, reason: str) -> None:
    """trainer.pack_sequences=null on a model that cannot be packed: padded passes, said once per model."""
    if not getattr(model, "_chorus_pack_said", False):
        warnings.warn(f"{type(model).__name__} is not packed ({reason}); its update passes stay right-padded",
                      stacklevel=3)
        with contextlib.suppress(AttributeError):
            model._chorus_pack_said = True
