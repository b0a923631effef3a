"""The memory plan (chorus/memory_plan.py): parameter counts against Qwen3's published sizes,
activation coefficients against the tensors real Qwen3 layers save for backward (counted with
saved_tensors_hooks, so the check does not depend on an allocator), and plan_only on docs/howto/gpus.md's
Qwen3-4B recipe: it fits a 141 GB device with checkpointing and not without."""
import subprocess
import sys

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen3Config

from chorus.memory_plan import KNOWN, Arch, Job, plan, refusal


@pytest.mark.parametrize("name, total, non_embedding", [("Qwen/Qwen3-0.6B", 0.6e9, 0.44e9),
                                                         ("Qwen/Qwen3-4B", 4.0e9, 3.6e9),
                                                         ("Qwen/Qwen3-8B", 8.2e9, 6.95e9)])
def test_parameter_counts_match_qwen3s_published_sizes(name, total, non_embedding):
    a = Arch(**KNOWN[name])
    embedding = a.vocab * a.hidden * (1 if a.tied else 2)
    assert a.params == pytest.approx(total, rel=0.02)  # published to 2 digits
    assert a.params - embedding == pytest.approx(non_embedding, rel=0.02)


def saved_values_per_token(arch: Arch, layers: int, tokens: int = 128, checkpointing: bool = False) -> float:
    """fp32 values a real Qwen3 body keeps for backward, per token (parameters excluded)."""
    cfg = Qwen3Config(vocab_size=arch.vocab, hidden_size=arch.hidden, num_hidden_layers=layers,
                      num_attention_heads=arch.heads, num_key_value_heads=arch.kv_heads, head_dim=arch.head_dim,
                      intermediate_size=arch.ffn, tie_word_embeddings=True, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg).train()
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    params, seen = {p.data_ptr() for p in model.parameters()}, {}

    def pack(t):
        if t.is_floating_point() and t.data_ptr() not in params:
            seen[(t.data_ptr(), t.numel())] = t.numel()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model.model(input_ids=torch.randint(0, arch.vocab, (1, tokens)))
    return sum(seen.values()) / tokens


@pytest.mark.parametrize("shape", [(64, 192, 4, 2, 16), (128, 384, 4, 2, 32), (96, 1024, 6, 2, 16)])
def test_activation_values_per_layer_are_those_a_qwen3_layer_saves(shape):
    h, ffn, heads, kv, hd = shape
    a = Arch(h, 1, heads, kv, hd, ffn, 512)
    # one layer more adds one layer's saved tensors: the plan's count, to 1 %
    per_layer = saved_values_per_token(a, 2) - saved_values_per_token(a, 1)
    assert per_layer == pytest.approx(a.activation_values()[0], rel=0.01)
    # with checkpointing only the layer's input stays: h values
    kept = saved_values_per_token(a, 2, checkpointing=True) - saved_values_per_token(a, 1, checkpointing=True)
    assert kept == pytest.approx(h, rel=0.01)


def job(**over) -> Job:
    base = dict(arch=Arch(**KNOWN["Qwen/Qwen3-4B"]), row_tokens=8192, completion_tokens=2048, micro_rows=8,
                engine="vllm", vllm_share=0.3)
    return Job(**{**base, **over})


def test_the_plan_adds_up_by_hand():
    a = Arch(**KNOWN["Qwen/Qwen3-4B"])
    r = plan(job(), 131.0)
    p = a.params
    assert r["items"]["weights (fp32 masters)"][0] == pytest.approx(4 * p / 2**30)
    assert r["items"]["optimizer (AdamW)"][1] == pytest.approx(8 * p / 2**30)
    assert r["items"]["engine"] == pytest.approx((0.3 * 131.0, 0.0))  # asleep through the update
    # checkpointed: 8 x 8192 tokens x (36 layers x 2560 x 2 bytes + one layer's full set in bf16 + fp32 norms)
    low, fp32 = a.activation_values()
    assert r["items"]["activations"][1] == pytest.approx(65536 * (36 * 2560 * 2 + 2 * low + 4 * fp32) / 2**30)
    assert r["fits"] and r["update"] == pytest.approx(sum(v[1] for v in r["items"].values()))
    assert not plan(job(checkpointing=False), 131.0)["fits"]
    fsdp = plan(job(shards=4), 131.0)["items"]["optimizer (AdamW)"][1]
    assert fsdp == pytest.approx(r["items"]["optimizer (AdamW)"][1] / 4)


def test_a_plan_that_does_not_fit_names_its_largest_item_and_the_setting():
    line = refusal(plan(job(checkpointing=False), 131.0))
    assert "\n" not in line and "most of it activations" in line and "trainer.gradient_checkpointing=true" in line
    line = refusal(plan(job(vllm_share=0.9), 131.0))
    assert "in the rollout" in line and "rl.vllm_memory" in line


RECIPE = ["job=rl", "sft_stage=stage0", "sft_stage.checkpoint=Qwen/Qwen3-4B", "trainer=gpu", "model=hf",
          "model.dtype=bfloat16", "rl.engine=vllm", "rl.max_prompt_tokens=6144", "rl.max_new_tokens=2048",
          "rl.group_size=8", "plan_only=true", "plan_device_gib=131"]  # 141 GB = 131 GiB


def test_plan_only_prints_the_readme_recipes_plan_and_refuses_eight_8k_rows_without_checkpointing(tmp_path):
    run = lambda *extra: subprocess.run([sys.executable, "-m", "chorus.train", *RECIPE, *extra,  # noqa: E731
                                         f"hydra.run.dir={tmp_path}/h", f"runs_dir={tmp_path}"],
                                        capture_output=True, text=True, timeout=300)
    ok = run()
    assert ok.returncode == 0, ok.stderr
    assert "(4.02 B parameters)" in ok.stdout and "device 131 GiB: fits" in ok.stdout
    assert not any(tmp_path.glob("rl/*"))  # nothing ran, no run dir
    bad = run("trainer.gradient_checkpointing=false")
    assert bad.returncode == 2 and "does NOT fit" in bad.stdout
    assert bad.stderr.count("\n") == 1 and "trainer.gradient_checkpointing=true" in bad.stderr
    cpu = subprocess.run([sys.executable, "-m", "chorus.train", *RECIPE[:-1], f"hydra.run.dir={tmp_path}/h2"],
                         capture_output=True, text=True, timeout=300)
    assert cpu.returncode == 2 and "plan_device_gib=<GiB>" in cpu.stderr
