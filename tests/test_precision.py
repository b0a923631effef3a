"""Mixed precision: a trained policy keeps fp32 master weights whatever model.dtype says.

The failure this guards against (measured on an H200 with model.dtype=bfloat16): AdamW updating bf16
parameters directly rounds most updates away, because a step of lr 1e-6 is far below bf16's spacing
(2^-8 relative) around a weight of typical size. `test_a_bf16_parameter_loses_small_adam_steps` is
that null in isolation; before the fix, the bf16-configured run below changed only a small share of
the weights (see `_changed_share`) and exported bf16, so it failed both assertions.
"""
import json

import torch

from chorus.policy.models import export_merged, load_model
from chorus.rl.algos import get_algo
from chorus.rl.run import train_rl
from helpers import context, rl_settings, weights


def _changed_share(before: dict, after: dict) -> float:
    """The share of entries that moved, against the init rounded to the export's dtype."""
    changed = sum(int((before[k].to(after[k].dtype) != after[k]).sum()) for k in before)
    return changed / sum(v.numel() for v in before.values())


def test_a_bf16_parameter_loses_small_adam_steps():
    """The null: one AdamW step at lr 1e-6 moves every entry of an fp32 tensor but almost none of a
    bf16 one (Adam's first step is ~lr * sign(grad), far below bf16's rounding step)."""
    torch.manual_seed(0)
    init = torch.randn(4096) * 0.02
    shares = {}
    for dtype in (torch.float32, torch.bfloat16):
        p = torch.nn.Parameter(init.to(dtype).clone())
        opt = torch.optim.AdamW([p], lr=1e-6, weight_decay=0.0)
        p.grad = torch.randn(4096).to(dtype)
        opt.step()
        shares[dtype] = float((p.detach() != init.to(dtype)).float().mean())
    assert shares[torch.float32] == 1.0 and shares[torch.bfloat16] < 0.05, shares


def _bf16_run(sft_xs, out, rl_tasks, sim, **over):
    """An RL run configured like model.dtype=bfloat16 (ctx.dtype) at lr 1e-6, one full-lr step."""
    ctx = context(out, sim, dtype="bfloat16")
    rl = rl_settings(steps=1, lr=1e-6, warmup_steps=1, **over)
    return train_rl(str(sft_xs), get_algo("dapo", overlong_buffer=32), rl_tasks, (), ctx, rl=rl)


def test_bf16_configured_run_trains_fp32_masters_and_exports_full_precision(sft_xs, rl_tasks, sim, tmp_path):
    _bf16_run(sft_xs, tmp_path, rl_tasks, sim)
    before, after = weights(sft_xs), weights(tmp_path / "hf")
    share = _changed_share(before, after)
    print(f"share of changed weights (bf16 config, lr 1e-6, 1 step): {share:.3%}")
    assert before.keys() == after.keys()
    assert {v.dtype for v in after.values()} == {torch.float32}
    assert [k for k in before if torch.equal(before[k], after[k])] == []  # every tensor moved
    # Entries with a zero gradient (embedding rows of tokens never sampled) stay put; the rest move.
    assert share > 0.5
    assert json.loads((tmp_path / "hf/config.json").read_text())["dtype"] == "float32"
    # the resume checkpoint holds the fp32 masters as well
    state = torch.load(tmp_path / "ckpt/last.ckpt", map_location="cpu", weights_only=False)["state_dict"]
    assert {v.dtype for k, v in state.items() if k.startswith("model.")} == {torch.float32}


def test_export_dtype_bfloat16_opts_out_of_the_full_precision_export(sft_xs, rl_tasks, sim, tmp_path):
    _bf16_run(sft_xs, tmp_path, rl_tasks, sim, export_dtype="bfloat16")
    assert {v.dtype for v in weights(tmp_path / "hf").values()} == {torch.bfloat16}
    assert json.loads((tmp_path / "hf/config.json").read_text())["dtype"] == "bfloat16"


def test_export_in_another_dtype_leaves_the_trained_model_alone(tiny_xs, tmp_path):
    model, tok = load_model("hf", path=str(tiny_xs))
    export_merged(model, tok, tmp_path / "hf", dtype="bfloat16")
    export_merged(model, tok, tmp_path / "fp32")
    half, full = weights(tmp_path / "hf"), weights(tmp_path / "fp32")
    assert half.keys() == full.keys() and {v.dtype for v in half.values()} == {torch.bfloat16}
    assert {v.dtype for v in full.values()} == {torch.float32}
    assert {p.dtype for p in model.parameters()} == {torch.float32}  # the masters are not rounded
    reloaded, _ = load_model("hf", path=str(tmp_path / "hf"), dtype="bfloat16")
    assert next(reloaded.parameters()).dtype == torch.bfloat16
