"""The memory plan (chorus/memory_plan.py): parameter counts against Qwen3's published sizes,
activation coefficients against the tensors real Qwen3 layers save for backward, by dtype, in fp32 and
under bf16 autocast (counted with saved_tensors_hooks, so the check does not depend on an allocator),
a small plan's three phases computed by hand, the refusals, and plan_only on docs/howto/gpus.md's
Qwen3-4B recipe for a 140 GiB device (an H200)."""
import subprocess
import sys
import warnings
from collections import Counter

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen3Config

from chorus.memory_plan import GIB, KNOWN, Arch, Job, fitting_micro_batch, plan, plan_text, refusal


@pytest.mark.parametrize("name, total, non_embedding", [("Qwen/Qwen3-0.6B", 0.6e9, 0.44e9),
                                                         ("Qwen/Qwen3-4B", 4.0e9, 3.6e9),
                                                         ("Qwen/Qwen3-8B", 8.2e9, 6.95e9)])
def test_parameter_counts_match_qwen3s_published_sizes(name, total, non_embedding):
    a = Arch(**KNOWN[name])
    embedding = a.vocab * a.hidden * (1 if a.tied else 2)
    assert a.params == pytest.approx(total, rel=0.02)  # published to 2 digits
    assert a.params - embedding == pytest.approx(non_embedding, rel=0.02)


def saved_values(arch: Arch, layers: int, tokens: int, mixed: bool, checkpointing: bool = False) -> Counter:
    """Values a real Qwen3 body (fp32 weights) keeps for backward, by dtype, parameters excluded;
    `mixed`: under bf16 autocast, as Lightning's bf16-mixed runs it (on the CPU here)."""
    cfg = Qwen3Config(vocab_size=arch.vocab, hidden_size=arch.hidden, num_hidden_layers=layers,
                      num_attention_heads=arch.heads, num_key_value_heads=arch.kv_heads, head_dim=arch.head_dim,
                      intermediate_size=arch.ffn, tie_word_embeddings=True, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg).train()
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    params, seen = {p.data_ptr() for p in model.parameters()}, {}

    def pack(t):
        if t.is_floating_point() and t.data_ptr() not in params:  # one storage counts once
            seen[(t.data_ptr(), t.numel(), t.dtype)] = t.numel()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
            torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed):
        model.model(input_ids=torch.randint(0, arch.vocab, (1, tokens)))
    by_dtype = Counter()
    for (_, _, dtype), n in seen.items():
        by_dtype[dtype] += n
    return by_dtype


def per_token(arch: Arch, layers: int, mixed: bool, checkpointing: bool = False) -> dict:
    """Saved values per token by dtype: the difference between 128 and 64 tokens, which drops what does
    not grow with the tokens (autocast's bf16 copies of the weights)."""
    long, short = (saved_values(arch, layers, t, mixed, checkpointing) for t in (128, 64))
    return {d: (long[d] - short[d]) / 64 for d in (torch.bfloat16, torch.float32)}


def per_layer(arch: Arch, mixed: bool, checkpointing: bool = False) -> dict:
    two, one = per_token(arch, 2, mixed, checkpointing), per_token(arch, 1, mixed, checkpointing)
    return {d: two[d] - one[d] for d in two}


def cpu_sdpa_fuses_gqa() -> bool:
    """Whether torch's CPU SDPA runs grouped-query attention (fewer key/value heads than query heads,
    transformers' enable_gqa) in its fused kernel, which keeps what the GPU kernels the plan counts keep.
    torch 2.8's (vLLM 0.11.0's) needs equal head counts and falls back to the math path, which also
    keeps the [heads, tokens, tokens] probabilities: no CPU measure of a GPU layer there."""
    q, kv = torch.zeros(1, 2, 4, 8, requires_grad=True), torch.zeros(1, 1, 4, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch 2.8 warns that its fused kernels need equal head counts
        out = torch.nn.functional.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True)
    return "Flash" in type(out.grad_fn).__name__


@pytest.mark.parametrize("shape", [(40, 100, 4, 2, 12),  # h, q, kv, ffn all different: each term shows
                                   pytest.param((128, 384, 4, 2, 32), marks=pytest.mark.slow),
                                   pytest.param((96, 1024, 6, 2, 16), marks=pytest.mark.slow)])
def test_activation_values_are_those_a_qwen3_layer_saves_in_fp32_and_under_bf16_autocast(shape):
    h, ffn, heads, kv, hd = shape
    a = Arch(h, 1, heads, kv, hd, ffn, 512)
    # checkpointed, a layer keeps only its input: h values, and in fp32 under autocast too (the residual
    # stream is not autocast), which the plan counts at 4 bytes whatever the compute dtype
    assert per_layer(a, mixed=True, checkpointing=True) == {torch.bfloat16: 0, torch.float32: h}
    if not cpu_sdpa_fuses_gqa():
        pytest.skip(f"torch {torch.__version__}'s CPU SDPA has no fused grouped-query kernel: its math path "
                    "keeps the attention probabilities, which the GPU kernels the plan counts do not")
    for mixed in (False, True):
        half, full = a.activation_values(mixed)
        assert per_layer(a, mixed) == {torch.bfloat16: half, torch.float32: full}, mixed
    # beyond the layers: the final norm in fp32 (the rotary tables too, which the hooks see only
    # without checkpointing), whatever the autocast
    one = per_token(a, 1, mixed=True)
    assert one[torch.float32] - a.activation_values(True)[1] == a.body_values()


def test_the_activation_coefficients_by_hand():
    # Qwen3-4B: h 2560, q 32 x 128 = 4096, kv 8 x 128 = 1024, ffn 9728
    a = Arch(**KNOWN["Qwen/Qwen3-4B"])
    assert a.activation_values(True) == (5 * 2560 + 3 * 4096 + 3 * 1024 + 4 * 9728,  # 67,072 in bf16
                                         4 * 2560 + 4096 + 1024 + 2 + 2 * 32 + 8)  # 15,434 in fp32
    assert a.activation_values(False) == (0, 6 * 2560 + 4 * 4096 + 4 * 1024 + 4 * 9728 + 2 + 2 * 32 + 8)


# A small model whose plan is computed by hand below. params: per layer q 8x8, k and v 2 x 8x4,
# o 8x8, MLP 3 x 8x16, norms 2x8 + 2x4 = 64 + 64 + 64 + 384 + 24 = 600; 2 layers, a tied 32 x 8
# embedding and the final norm: 1200 + 256 + 8 = 1464
SMALL = Arch(hidden=8, layers=2, heads=2, kv_heads=1, head_dim=4, ffn=16, vocab=32)
P = 1464


def small(**over) -> Job:
    base = dict(arch=SMALL, row_tokens=10, completion_tokens=4, micro_rows=2, logit_chunk=5, engine="vllm",
                vllm_share=0.25)
    return Job(**{**base, **over})


def in_bytes(result: dict) -> dict:
    return {k: [v * GIB for v in phases] for k, phases in result["items"].items()}


def assert_items(result: dict, expected: dict) -> None:
    got = in_bytes(result)
    assert got.keys() == expected.keys()
    for k, phases in expected.items():
        assert got[k] == pytest.approx(list(phases)), k


def test_a_small_plans_three_phases_add_up_by_hand():
    assert SMALL.params == P
    engine = 0.25 * GIB  # a quarter of a 1 GiB device
    # activations, checkpointed, bf16-mixed, 2 x 10 tokens: per layer in bf16 5x8 + 3x8 + 3x4 + 4x16 = 140
    # values, in fp32 4x8 + 8 + 4 + 2 + 2x2 + 1 = 51: 2 x 140 + 4 x 51 = 484 bytes; kept inputs 2 layers x
    # 8 x 4 bytes = 64; the final norm and rotary tables 4 x (2x8 + 1 + 2x4) = 100: 20 x 648 = 12,960
    activations = 12960
    logits = 5 * 32 * (2 + 4 + 4 + 4)  # min(chunk 5, 2 rows x 4 completion tokens) positions x vocab
    expected = {"weights (fp32 masters)": (4 * P,) * 3, "gradients": (0, 4 * P, 0),  # freed before the wake
                "DDP gradient buckets": (0, 0, 0), "optimizer (AdamW)": (8 * P,) * 3,
                "reference and teachers": (0, 0, 0), "inference copy": (0, 0, 0),
                "engine": (engine, 0, engine),  # asleep for the update
                "full weights for the sync": (0, 0, 0), "offloaded units in use": (0, 0, 0),
                "activations": (0, activations, 0),
                "logits (one chunk)": (0, logits, 0)}
    r = plan(small(), 1.0)
    assert_items(r, expected)
    assert r["rollout"] * GIB == pytest.approx(12 * P + engine)
    assert r["update"] * GIB == pytest.approx(16 * P + activations + logits)
    assert r["transition"] * GIB == pytest.approx(12 * P + engine)
    assert (r["phase"], r["fits"]) == ("rollout", True)  # ties name the earlier phase
    # DDP: a persistent fp32 copy of the gradients in every phase
    ddp = in_bytes(plan(small(ddp_buckets=True), 1.0))
    assert ddp["DDP gradient buckets"] == pytest.approx([4 * P] * 3)
    # FSDP over 2: state halved, and the sync gathers the full fp32 weights for the engine
    fsdp = in_bytes(plan(small(shards=2), 1.0))
    assert fsdp["optimizer (AdamW)"] == pytest.approx([4 * P] * 3)
    assert fsdp["full weights for the sync"] == pytest.approx([0, 0, 4 * P])
    # the update's memory still held at the wake: the transition is the update plus the engine
    held = plan(small(freed_before_wake=False), 1.0)
    assert held["transition"] * GIB == pytest.approx(16 * P + activations + logits + engine)
    # without checkpointing every layer keeps its 484 bytes a token: 20 x (2 x 484 + 100)
    assert in_bytes(plan(small(checkpointing=False), 1.0))["activations"][1] == pytest.approx(20 * 1068)
    # 32-true: everything in fp32 (6x8 + 4x8 + 4x4 + 4x16 + 7 = 167 values), the inputs still 4 bytes
    fp32 = in_bytes(plan(small(compute_bytes=4), 1.0))
    assert fp32["activations"][1] == pytest.approx(20 * (64 + 4 * 167 + 100))
    assert fp32["logits (one chunk)"][1] == pytest.approx(5 * 32 * 16)


def test_lora_s_bf16_base_and_the_inference_copy_by_hand():
    """LoRA: the adapter's share trains in fp32 (weights, gradients, AdamW), the rest of the policy is
    its frozen base in model.dtype; an inference copy holds every parameter again in its dtype."""
    lora = in_bytes(plan(small(trainable_share=0.25, base_bytes=2), 1.0))
    assert lora["weights (fp32 masters)"] == pytest.approx([4 * 0.25 * P + 2 * 0.75 * P] * 3)
    assert lora["optimizer (AdamW)"] == pytest.approx([8 * 0.25 * P] * 3)
    copy = in_bytes(plan(small(engine="hf", copy_bytes=2), 1.0))
    assert copy["inference copy"] == pytest.approx([2 * P] * 3)


def test_fsdp_cpu_offload_keeps_the_state_on_the_host_by_hand():
    """Offloaded: no weights, gradients or AdamW state on the device; in the update two decoder layers'
    fp32 parameters and gradients (the one computed, the one prefetched) and the gathered root (the
    tied embedding); the vLLM sync gathers the full fp32 weights onto the device."""
    r = in_bytes(plan(small(offload=True), 1.0))
    assert r["weights (fp32 masters)"] == r["optimizer (AdamW)"] == r["gradients"] == pytest.approx([0, 0, 0])
    layer = (P - 32 * 8) / 2  # 604: a decoder layer's share, the final norm included
    assert r["offloaded units in use"] == pytest.approx([0, 2 * 8 * layer + 8 * 32 * 8, 0])
    assert r["full weights for the sync"] == pytest.approx([0, 0, 4 * P])


def test_train_job_counts_the_copy_where_rl_inference_copy_turns_it_on():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from chorus.config.schema import CONF_DIR, register_configs
    from chorus.memory_plan import train_job

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        conf = OmegaConf.to_object(compose(config_name="train", overrides=["job=rl", "trainer=gpu", "model.dtype=bfloat16"]))
    assert train_job("rl", conf, "Qwen/Qwen3-4B", cuda=True).copy_bytes == 2  # auto: hf on a GPU, bf16
    conf.rl.inference_copy = "off"
    assert train_job("rl", conf, "Qwen/Qwen3-4B", cuda=True).copy_bytes == 0
    conf.rl.lora.r = 16
    assert train_job("rl", conf, "Qwen/Qwen3-4B", cuda=True).base_bytes == 2


def test_an_hf_engine_has_no_transition_beyond_its_rollout():
    r = plan(small(engine="hf", rollout_rows=3), 1.0)
    kv = 2 * 1 * 4 * 2 * 2  # k and v x kv_heads x head_dim x layers x bf16 bytes a token
    assert r["items"]["engine"][0] * GIB == pytest.approx(3 * (10 * kv + 32 * 4 * 2))
    assert all(t == roll for roll, _, t in r["items"].values())


def job(**over) -> Job:
    base = dict(arch=Arch(**KNOWN["Qwen/Qwen3-4B"]), row_tokens=8192, completion_tokens=2048, micro_rows=8,
                engine="vllm", vllm_share=0.3)
    return Job(**{**base, **over})


def test_the_auto_micro_batch_is_the_most_rows_that_fit_up_to_a_mini_batch():
    for device in (79.6, 100.0, 140.0, 200.0):
        m = fitting_micro_batch(job(), device, 8)
        assert plan(job(micro_rows=m), device)["fits"]
        assert m == 8 or not plan(job(micro_rows=m + 1), device)["fits"]
    # 4B at 8,192 tokens a row: 2 rows (71 GiB of 73.2 usable) on an 80 GB card, a mini-batch's 8 on 140 GiB
    assert fitting_micro_batch(job(), 79.6, 8) == 2 and fitting_micro_batch(job(), 140.0, 8) == 8
    assert fitting_micro_batch(job(), 60.0, 8) is None  # masters, AdamW and vLLM's 30 % need 63 GiB in the rollout
    assert fitting_micro_batch(job(), 1e4, 3) == 3  # never more rows than a mini-batch has


def test_a_plan_that_does_not_fit_names_its_phase_largest_item_and_the_setting():
    line = refusal(plan(job(checkpointing=False), 140.0))
    assert "\n" not in line and "in the update" in line and "most of it activations" in line
    assert "trainer.gradient_checkpointing=true" in line
    line = refusal(plan(job(vllm_share=0.9), 140.0))
    assert "in the rollout" in line and "most of it engine" in line and "rl.vllm_memory" in line
    # FSDP over 2 with 70 % for vLLM: the rollout fits (7.5 + 15 + 98 GiB), the transition's gather of
    # the full weights (15 GiB) does not
    r = plan(job(shards=2, vllm_share=0.7), 140.0)
    assert r["rollout"] < 0.92 * 140 < r["transition"] and r["update"] < 0.92 * 140
    line = refusal(r)
    assert "in the transition (the vLLM engine waking" in line and "most of it engine (98.0 GiB)" in line
    assert "set a smaller rl.vllm_memory" in line and "vllm_sleep" not in line  # sleeping does not help here
    # the update still held when the engine wakes: 97.7 + 42 GiB on one device
    r = plan(job(freed_before_wake=False), 140.0)
    assert r["phase"] == "transition" and not r["fits"]
    text = plan_text(r, "x")
    assert "transition" in text.splitlines()[1] and "does NOT fit (largest: the transition" in text


RECIPE = ["job=rl", "sft_stage=stage0", "sft_stage.checkpoint=Qwen/Qwen3-4B", "trainer=gpu", "model=hf",
          "model.dtype=bfloat16", "rl.engine=vllm", "format=testbench", "rl.max_prompt_tokens=6144",
          "rl.max_new_tokens=2048", "rl.steps=200", "rl.group_size=8", "plan_only=true",
          "plan_device_gib=140"]  # an H200 reports about 140 GiB


@pytest.mark.slow
def test_plan_only_prints_the_recipes_three_phases_and_refuses_what_does_not_fit(tmp_path):
    run = lambda *extra: subprocess.run([sys.executable, "-m", "chorus.train", *RECIPE, *extra,  # noqa: E731
                                         f"hydra.run.dir={tmp_path}/h", f"runs_dir={tmp_path}"],
                                        capture_output=True, text=True, timeout=300)
    ok = run()
    assert ok.returncode == 0, ok.stderr
    lines = ok.stdout.splitlines()
    assert "(4.02 B parameters)" in lines[0] and lines[1].split() == ["item", "rollout", "update", "transition"]
    assert "device 140.0 GiB: fits" in ok.stdout
    # the recipe: 8 rows of 6144 + 2048 tokens (auto: a mini-batch's 8 fit 140 GiB), vLLM at 30 %, checkpointed
    expected = plan(job(), 140.0)
    assert "rl.micro_batch=null (auto): 8 rows per pass" in ok.stdout
    total = next(line for line in lines if line.split()[0] == "total").split()[1:]
    assert total == [f"{expected[ph]:.1f}" for ph in ("rollout", "update", "transition")]
    assert not any(tmp_path.glob("rl/*"))  # nothing ran, no run dir
    bad = run("trainer.gradient_checkpointing=false", "rl.micro_batch=8")  # a number wins over the plan
    assert bad.returncode == 2 and "does NOT fit" in bad.stdout
    assert bad.stderr.count("\n") == 1 and "trainer.gradient_checkpointing=true" in bad.stderr
    # the transition alone does not fit: FSDP over 2 gathers the full weights while vLLM holds 70 %
    wake = run("trainer=fsdp", "trainer.devices=2", "rl.vllm_memory=0.7")
    assert wake.returncode == 2 and "largest: the transition" in wake.stdout
    row = next(line for line in wake.stdout.splitlines() if line.startswith("  full weights for the sync"))
    assert row.split()[-3:] == ["0.0", "0.0", f"{4 * job().arch.params / GIB:.1f}"]
    assert wake.stderr.count("\n") == 1 and "in the transition" in wake.stderr and "rl.vllm_memory" in wake.stderr
    # an 80 GB card (an H100 reports about 79.6 GiB): auto takes 2 rows a pass, and the recipe fits
    h100 = run("plan_device_gib=79.6")
    assert h100.returncode == 0 and "device 79.6 GiB: fits" in h100.stdout, h100.stderr
    assert "rl.micro_batch=null (auto): 2 rows per pass" in h100.stdout
    assert f"{plan(job(micro_rows=2), 79.6)['update']:.1f}" in h100.stdout.split("total")[1].split()[:3]
    # not even one row fits 40 GiB (AdamW's state alone is 30): refused with the plan at one row
    small = run("plan_device_gib=40")
    assert small.returncode == 2 and "at rl.micro_batch=1" in small.stdout and "does NOT fit" in small.stdout
    assert small.stderr.count("\n") == 1 and "not even one row per pass fits" in small.stderr
    cpu = subprocess.run([sys.executable, "-m", "chorus.train", *RECIPE[:-1], f"hydra.run.dir={tmp_path}/h2"],
                         capture_output=True, text=True, timeout=300)
    assert cpu.returncode == 2 and "plan_device_gib=<GiB>" in cpu.stderr
