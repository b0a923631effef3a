"""A GPU job's per-device memory budget, printed before it loads anything (chorus.train), refused when
it exceeds the device, and on its own with plan_only=true.

The budget is two phases, each the sum of what is resident then:
- rollout: fp32 policy weights, AdamW state, reference model, teachers kept in memory, and the
  engine's share (vLLM: rl.vllm_memory of the device; HF: its KV cache and one step's logits);
- update: weights, gradients, AdamW state, reference, teachers kept for mode=direct, vLLM only when it
  does not sleep, the micro-batch's activations and the completion logits of one chunk.
Activations per token per layer are counted from the tensors a Qwen3 decoder layer saves for its
backward pass: 6 h + 4 q + 4 kv + 4 ffn values (h hidden, q = heads x head_dim, kv = kv_heads x
head_dim), in the compute dtype, plus, under bf16, fp32 copies in RMSNorm (2 h + q + kv); with checkpointing
only each layer's input (h) is kept, and one layer's full set exists during its recompute. The fp32
coefficients were counted with saved_tensors_hooks on real Qwen3 layers (tests/test_memory_plan.py);
the bf16 ones follow from them and are unmeasured (no GPU has run chorus). What is not counted: the
CUDA context, allocator fragmentation and kernel workspaces, hence HEADROOM.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

GIB = 2 ** 30
HEADROOM = 0.92  # a plan fits when its larger phase is below this share of the device
# Published configurations, for planning without the checkpoint at hand (config.json wins when present)
KNOWN = {"Qwen/Qwen3-4B": dict(hidden=2560, layers=36, heads=32, kv_heads=8, head_dim=128, ffn=9728, vocab=151936,
                               tied=True),
         "Qwen/Qwen3-8B": dict(hidden=4096, layers=36, heads=32, kv_heads=8, head_dim=128, ffn=12288, vocab=151936,
                               tied=False),
         "Qwen/Qwen3-0.6B": dict(hidden=1024, layers=28, heads=16, kv_heads=8, head_dim=128, ffn=3072, vocab=151936,
                                 tied=True)}


@dataclass(frozen=True)
class Arch:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tied: bool = True

    @property
    def params(self) -> int:
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        layer = self.hidden * q + 2 * self.hidden * kv + q * self.hidden + 3 * self.hidden * self.ffn
        layer += 2 * self.hidden + 2 * self.head_dim  # input/post norms, q_norm and k_norm
        return self.layers * layer + self.vocab * self.hidden * (1 if self.tied else 2) + self.hidden

    def activation_values(self) -> tuple[float, float]:
        """Values saved per token per layer for backward: (in the compute dtype, in fp32)."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return 6 * self.hidden + 4 * q + 4 * kv + 4 * self.ffn, 2 * self.hidden + q + kv


def arch_of(path: str) -> Arch:
    """The architecture of a checkpoint: its config.json when it is a local dir, else a published one."""
    cfg = Path(path) / "config.json"
    if cfg.exists():
        c = json.loads(cfg.read_text())
        c = c.get("text_config", c)
        heads = c["num_attention_heads"]
        return Arch(c["hidden_size"], c["num_hidden_layers"], heads, c.get("num_key_value_heads", heads),
                    c.get("head_dim") or c["hidden_size"] // heads, c["intermediate_size"], c["vocab_size"],
                    bool(c.get("tie_word_embeddings", False)))
    if path in KNOWN:
        return Arch(**KNOWN[path])
    raise ValueError(f"cannot plan memory for {path}: no config.json there and not one of {sorted(KNOWN)}; "
                     "give a local checkpoint dir")


@dataclass(frozen=True)
class Job:
    """What a training job holds on one device (plain values: chorus.train fills them from the config)."""
    arch: Arch
    row_tokens: int  # prompt + completion of the longest row
    completion_tokens: int  # completion tokens of one row (the logits' positions)
    micro_rows: int  # rows per forward/backward
    compute_bytes: int = 2  # 2 under bf16-mixed, 4 in 32-true
    checkpointing: bool = True
    logit_chunk: int = 1024
    trainable_share: float = 1.0  # LoRA: the adapter's share of the parameters
    reference: bool = False  # a frozen reference copy (kl_coef > 0 without LoRA)
    frozen_copies: int = 0  # teachers kept in memory (OPD)
    frozen_bytes: int = 2  # model.dtype of reference and teachers
    engine: str = "hf"  # hf | vllm | none (SFT)
    vllm_share: float = 0.3
    vllm_sleeps: bool = True
    rollout_rows: int = 32  # rows an HF engine generates at once
    shards: int = 1  # FSDP: parameters, gradients and optimizer state split over this many devices
    ddp_buckets: bool = False  # DDP's gradient buckets: another fp32 copy of the gradients


def plan(job: Job, device_gib: float) -> dict:
    """Each item in GiB per phase, the phases' totals, and whether the plan fits `device_gib`."""
    a, p = job.arch, job.arch.params
    trained = p * job.trainable_share
    weights = 4 * p / job.shards
    optimizer = 8 * trained / job.shards  # AdamW's two fp32 moments
    grads = 4 * trained / job.shards * (2 if job.ddp_buckets else 1)
    frozen = (int(job.reference) + job.frozen_copies) * job.frozen_bytes * p
    tokens = job.micro_rows * job.row_tokens
    low, fp32 = a.activation_values()
    per_layer = job.compute_bytes * low + (4 * fp32 if job.compute_bytes < 4 else 0)  # fp32: no upcast copies
    if job.checkpointing:  # each layer's input, plus one layer's full set during its recompute
        activations = tokens * (a.layers * a.hidden * job.compute_bytes + per_layer)
    else:
        activations = tokens * a.layers * per_layer
    chunk = min(job.logit_chunk, job.micro_rows * job.completion_tokens)
    logits = chunk * a.vocab * (job.compute_bytes + 4 + 4 + 4)  # head output, fp32 logits, softmax, gradient
    if job.engine == "vllm":
        engine_rollout = job.vllm_share * device_gib * GIB
        engine_update = 0.0 if job.vllm_sleeps else engine_rollout
    elif job.engine == "hf":
        kv = 2 * a.kv_heads * a.head_dim * a.layers * job.compute_bytes
        engine_rollout = job.rollout_rows * (job.row_tokens * kv + a.vocab * 4 * 2)
        engine_update = 0.0
    else:
        engine_rollout = engine_update = 0.0
    items = {"weights (fp32 masters)": (weights, weights), "gradients": (0.0, grads), "optimizer (AdamW)":
             (optimizer, optimizer), "reference and teachers": (frozen, frozen), "engine": (engine_rollout, engine_update),
             "activations": (0.0, activations), "logits (one chunk)": (0.0, logits)}
    gib = {k: (r / GIB, u / GIB) for k, (r, u) in items.items()}
    rollout, update = (sum(v[i] for v in gib.values()) for i in (0, 1))
    return {"items": gib, "rollout": rollout, "update": update, "peak": max(rollout, update),
            "device": device_gib, "fits": max(rollout, update) <= HEADROOM * device_gib, "params": p}


# the setting that shrinks each item, for the refusal
FIXES = {"activations": "trainer.gradient_checkpointing=true, or fewer tokens per pass (rl.micro_tokens, rl.micro_batch)",
         "logits (one chunk)": "a smaller trainer.logit_chunk",
         "optimizer (AdamW)": "rl.lora.r > 0, or trainer=fsdp over more devices",
         "gradients": "rl.lora.r > 0, or trainer=fsdp over more devices",
         "weights (fp32 masters)": "trainer=fsdp over more devices",
         "engine": "a smaller rl.vllm_memory (or rl.vllm_sleep=true), or fewer rl.prompts_per_generate",
         "reference and teachers": "rl_algo.kl_coef=0, or consolidation.teachers_in_memory=false"}


def refusal(result: dict) -> str:
    """One line: what exceeds the device, its largest item, and the setting to change."""
    phase = "update" if result["update"] >= result["rollout"] else "rollout"
    i = 0 if phase == "rollout" else 1
    item = max(result["items"], key=lambda k: result["items"][k][i])
    return (f"the memory plan needs {result['peak']:.1f} GiB per device in the {phase} (limit {HEADROOM:.0%} of "
            f"{result['device']:.0f} GiB), most of it {item} ({result['items'][item][i]:.1f} GiB): set {FIXES[item]}, "
            "or plan_only=true to see the whole plan")


def plan_text(result: dict, what: str) -> str:
    rows = [f"memory plan per device for {what} ({result['params'] / 1e9:.2f} B parameters), GiB:",
            f"  {'item':<26}{'rollout':>10}{'update':>10}"]
    rows += [f"  {k:<26}{r:>10.1f}{u:>10.1f}" for k, (r, u) in result["items"].items()]
    rows += [f"  {'total':<26}{result['rollout']:>10.1f}{result['update']:>10.1f}",
             f"  device {result['device']:.0f} GiB: {'fits' if result['fits'] else 'does NOT fit'} "
             f"(limit {HEADROOM:.0%}: CUDA context, fragmentation and workspaces are not counted)"]
    return "\n".join(rows)


def train_job(job: str, conf, policy: str, cuda: bool) -> Job:
    """The Job of chorus.train's `job` (sft | rl | consolidation=opd) under `conf` (TrainConf) for the
    policy checkpoint `policy`, planned as it runs on a GPU (`cuda`: the trainer's default there)."""
    t, rl = conf.trainer, conf.rl
    arch = arch_of(policy)
    checkpointing = t.gradient_checkpointing if t.gradient_checkpointing is not None else cuda
    compute = 2 if "16" in str(t.precision) else 4
    devices = t.devices if isinstance(t.devices, int) and t.devices > 0 else 1
    common = dict(arch=arch, compute_bytes=compute, checkpointing=checkpointing, logit_chunk=t.logit_chunk,
                  shards=devices * t.num_nodes if t.strategy == "fsdp" else 1, ddp_buckets=t.strategy == "ddp")
    if job == "sft":
        s = conf.sft_stage
        return Job(**common, row_tokens=s.max_tokens, completion_tokens=min(s.max_new_tokens, s.max_tokens),
                   micro_rows=s.batch_size, engine="none")
    row = rl.max_prompt_tokens + rl.max_new_tokens
    rows = max(1, rl.micro_tokens // row) if rl.micro_tokens else rl.micro_batch
    lora = rl.lora.r
    q, kv = arch.heads * arch.head_dim, arch.kv_heads * arch.head_dim
    share = min(1.0, lora * arch.layers * (2 * arch.hidden + q) * 2 / arch.params) if lora else 1.0  # q and v
    frozen = 0
    reference = job == "rl" and conf.rl_algo.kl_coef > 0 and not lora
    if job == "consolidation":
        cons = conf.consolidation
        n = len(conf.teacher_pool.teachers)
        frozen = n if (cons.teachers_in_memory or str(cons.mode) == "direct") else 1
    return Job(**common, row_tokens=row, completion_tokens=rl.max_new_tokens, micro_rows=rows, trainable_share=share,
               reference=reference, frozen_copies=frozen, frozen_bytes=2 if "16" in conf.model.dtype else 4,
               engine=str(rl.engine), vllm_share=rl.vllm_memory, vllm_sleeps=rl.vllm_sleep,
               rollout_rows=rl.prompts_per_generate * rl.group_size)
