"""A GPU job's per-device memory budget, printed before it loads anything (chorus.train), refused when
it exceeds the device, and on its own with plan_only=true.

The budget is three phases, each the sum of what is resident then:
- rollout: fp32 policy weights, AdamW state, reference model, teachers kept in memory, DDP's gradient
  buckets, and the engine's share (vLLM: rl.vllm_memory of the device; HF: its KV cache and one step's
  logits);
- update: the same with the gradients, the micro-batch's activations and the completion logits of one
  chunk, and vLLM only when it does not sleep;
- transition: the weight sync after the update, when the sleeping vLLM engine wakes (its whole share)
  while the trainer still holds its weights, AdamW state, reference, teachers and DDP buckets (the sync
  frees the gradients and empties the CUDA cache first, as TRL does; without that it would be the
  update's peak plus the engine), and under FSDP the full weights gathered for the engine.
Activations are the tensors a Qwen3 decoder layer saves for its backward pass, counted with
saved_tensors_hooks on real Qwen3 layers, in fp32 and under CPU bf16 autocast (tests/test_memory_plan.py
re-counts them): see Arch.activation_values. Under bf16-mixed the residual stream stays fp32 (the
embedding and the residual adds are not autocast), so a checkpointed layer keeps its input in fp32.
Unmeasured: the plan against a GPU's allocator (no GPU has run chorus), and CUDA autocast's op lists,
taken to cast as CPU autocast does (linear layers and attention to bf16). What is not counted: the
CUDA context, allocator fragmentation and kernel workspaces, hence HEADROOM.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

GIB = 2 ** 30
HEADROOM = 0.92  # a plan fits when its largest phase is below this share of the device
PHASES = ("rollout", "update", "transition")
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

    def activation_values(self, mixed: bool) -> tuple[int, int]:
        """Values one decoder layer saves per token for backward: (in the autocast dtype, in fp32).

        Counted tensor by tensor on real Qwen3 layers (h hidden, q = heads x head_dim, kv = kv_heads x
        head_dim). In fp32: each RMSNorm its input, normed input and reciprocal RMS (2 h + 1 twice, 2 q +
        heads and 2 kv + kv_heads for q_norm and k_norm), the q/k/v and gate/up projections' input (h each
        block), attention's q, k, v, output and log-sum-exp (2 q + 2 kv + heads), the MLP's gate, its SiLU,
        up and their product (4 ffn). Under autocast the norms still run in fp32 but hand bf16 on, and
        every linear casts its fp32 input anew (three bf16 copies of the normed input for q, k and v, two
        for gate and up), so the count grows in values but shrinks in bytes.
        """
        h, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        per_token = 2 + 2 * self.heads + self.kv_heads  # reciprocal RMSs (per token, per head) and the log-sum-exp
        if mixed:
            return 5 * h + 3 * q + 3 * kv + 4 * self.ffn, 4 * h + q + kv + per_token
        return 0, 6 * h + 4 * q + 4 * kv + 4 * self.ffn + per_token

    def body_values(self) -> int:
        """fp32 values per token the body keeps outside its layers: the final norm's input, normed input
        and reciprocal RMS, and the rotary tables (cos and sin, alive under checkpointing too, where
        the recomputation reads them)."""
        return 2 * self.hidden + 1 + 2 * self.head_dim


def _hub_config(path: str) -> dict | None:
    """A hub id's config.json from transformers' cache (a model downloaded before)."""
    try:
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(path, local_files_only=True).to_dict()  # never a network wait
    except Exception:  # not a model id transformers can resolve here: the caller's one-line error
        return None


def arch_of(path: str) -> Arch:
    """The architecture of a checkpoint: its config.json when it is a local dir, a published one, else
    the config of a hub id in transformers' cache."""
    cfg = Path(path) / "config.json"
    c = json.loads(cfg.read_text()) if cfg.exists() else (None if path in KNOWN else _hub_config(path))
    if c is not None:
        c = c.get("text_config", c)
        heads = c["num_attention_heads"]
        return Arch(c["hidden_size"], c["num_hidden_layers"], heads, c.get("num_key_value_heads", heads),
                    c.get("head_dim") or c["hidden_size"] // heads, c["intermediate_size"], c["vocab_size"],
                    bool(c.get("tie_word_embeddings", False)))
    if path in KNOWN:
        return Arch(**KNOWN[path])
    raise ValueError(f"cannot plan memory for {path}: no config.json there, not one of {sorted(KNOWN)} and not "
                     "found by transformers; give a local checkpoint dir (or rl.micro_batch=N)")


@dataclass(frozen=True)
class Job:
    """What a training job holds on one device (plain values: chorus.train fills them from the config)."""
    arch: Arch
    row_tokens: int  # prompt + completion of the longest row
    completion_tokens: int  # completion tokens of one row (the logits' positions)
    micro_rows: int  # rows per forward/backward
    compute_bytes: int = 2  # 2 under bf16-mixed (fp32 masters, bf16 autocast), 4 in 32-true
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
    offload: bool = False  # trainer.fsdp_cpu_offload: parameters, gradients and AdamW state live on the host
    ddp_buckets: bool = False  # DDP's gradient buckets: another fp32 copy of the gradients
    # the weight sync drops the gradients and empties the CUDA cache before waking vLLM (TRL's order);
    # False: the update's memory is still held when the engine wakes
    freed_before_wake: bool = True
    base_bytes: int = 4  # bytes per frozen (not trained) parameter of the policy: LoRA's base in model.dtype
    copy_bytes: int = 0  # rl.inference_copy: the HF engine's copy of the policy, bytes per parameter (0: none)


def activation_bytes(job: Job) -> float:
    """What the micro-batch's forward keeps for backward, at its peak (the start of the backward)."""
    a = job.arch
    tokens = job.micro_rows * job.row_tokens
    half, full = a.activation_values(mixed=job.compute_bytes < 4)
    per_layer = job.compute_bytes * half + 4 * full
    body = 4 * a.body_values()
    if job.checkpointing:  # each layer's input (the fp32 residual stream), and one layer's full set in its recompute
        return tokens * (a.layers * 4 * a.hidden + per_layer + body)
    return tokens * (a.layers * per_layer + body)


def logits_bytes(job: Job) -> float:
    chunk = min(job.logit_chunk, job.micro_rows * job.completion_tokens)
    return chunk * job.arch.vocab * (job.compute_bytes + 4 + 4 + 4)  # head output, fp32 logits, softmax, gradient


def engine_bytes(job: Job, device_gib: float) -> tuple[float, float, float]:
    """The engine's memory in the rollout, the update and the transition."""
    a = job.arch
    if job.engine == "vllm":
        share = job.vllm_share * device_gib * GIB
        return share, (0.0 if job.vllm_sleeps else share), share  # the sync wakes it before loading
    if job.engine == "hf":
        kv = 2 * a.kv_heads * a.head_dim * a.layers * job.compute_bytes
        rollout = job.rollout_rows * (job.row_tokens * kv + a.vocab * 4 * 2)
        return rollout, 0.0, rollout
    return 0.0, 0.0, 0.0


def plan(job: Job, device_gib: float) -> dict:
    """Each item in GiB per phase (rollout, update, transition), the phases' totals, the largest
    (`peak`, in `phase`), and whether the plan fits `device_gib`."""
    p = job.arch.params
    trained = p * job.trainable_share
    weights = (4 * trained + job.base_bytes * (p - trained)) / job.shards
    # offloaded (FSDP2's CPUOffloadPolicy): the sharded state stays on the host; on the device only the
    # units being computed, one decoder layer's fp32 parameters and gradients at a time and the next one
    # prefetched (the root's embeddings and head stay gathered from forward to backward: counted whole)
    layer = (p - job.arch.vocab * job.arch.hidden * (1 if job.arch.tied else 2)) / job.arch.layers
    units = 2 * 8 * layer + 8 * (p - layer * job.arch.layers) if job.offload else 0.0
    inference_copy = job.copy_bytes * p  # kept beside the masters in every phase, refreshed in place
    optimizer = 8 * trained / job.shards  # AdamW's two fp32 moments
    grads = 4 * trained / job.shards
    if job.offload:
        weights = optimizer = grads = 0.0
    # DDP's reducer allocates its buckets when it wraps the model and keeps them: every phase holds them
    buckets = grads if job.ddp_buckets else 0.0
    frozen = (int(job.reference) + job.frozen_copies) * job.frozen_bytes * p
    # the sync hands vLLM full tensors: the parameters themselves, unless FSDP gathers them (fp32)
    gathered = 4.0 * p if job.engine == "vllm" and (job.shards > 1 or job.offload) else 0.0
    activations, logits = activation_bytes(job), logits_bytes(job)
    held = 0.0 if job.freed_before_wake else 1.0  # the update's own memory, still held at the wake
    items = {"weights (fp32 masters)": (weights, weights, weights),
             "gradients": (0.0, grads, held * grads),
             "DDP gradient buckets": (buckets, buckets, buckets),
             "optimizer (AdamW)": (optimizer, optimizer, optimizer),
             "reference and teachers": (frozen, frozen, frozen),
             "inference copy": (inference_copy, inference_copy, inference_copy),
             "engine": engine_bytes(job, device_gib),
             "full weights for the sync": (0.0, 0.0, gathered),
             "offloaded units in use": (0.0, units, 0.0),
             "activations": (0.0, activations, held * activations),
             "logits (one chunk)": (0.0, logits, held * logits)}
    if job.engine != "vllm":
        # No engine wakes: HF generates with the trainer's own weights (gradients freed before each
        # rollout) and allocates its KV cache inside the rollout, so the step from the update to the
        # next rollout holds what the rollout does; SFT has no rollout at all
        items = {k: (r, u, r) for k, (r, u, _) in items.items()}
    gib = {k: tuple(v / GIB for v in phases) for k, phases in items.items()}
    totals = {ph: sum(v[i] for v in gib.values()) for i, ph in enumerate(PHASES)}
    phase = max(("update", "rollout", "transition"), key=totals.get)  # ties: the earlier phase is named
    return {"items": gib, **totals, "peak": totals[phase], "phase": phase, "engine": job.engine,
            "device": device_gib, "fits": totals[phase] <= HEADROOM * device_gib, "params": p}


def fitting_micro_batch(job: Job, device_gib: float, cap: int) -> int | None:
    """rl.micro_batch=null (auto): the most rows per forward/backward, at most `cap` (a mini-batch's
    rows: more would never be used), whose plan fits `device_gib`; None when not even one row fits.
    Only the update's activations and logits grow with the rows, so the largest fitting count is found
    by bisection."""
    def fits(rows: int) -> bool:
        return plan(dataclasses.replace(job, micro_rows=rows), device_gib)["fits"]

    if not fits(1):
        return None
    low, high = 1, max(1, cap)
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fits(mid) else (low, mid - 1)
    return low


# the setting that shrinks each item, for the refusal
FIXES = {"activations": "trainer.gradient_checkpointing=true, or fewer tokens per pass (rl.micro_tokens, rl.micro_batch)",
         "logits (one chunk)": "a smaller trainer.logit_chunk",
         "optimizer (AdamW)": "rl.lora.r > 0, or trainer=fsdp over more devices (or with trainer.fsdp_cpu_offload=true)",
         "gradients": "rl.lora.r > 0, or trainer=fsdp over more devices",
         "DDP gradient buckets": "rl.lora.r > 0, or trainer=fsdp",
         "weights (fp32 masters)": "trainer=fsdp over more devices, or trainer.fsdp_cpu_offload=true",
         "offloaded units in use": "trainer.fsdp_cpu_offload=false with more devices",
         "engine": "fewer rows per rollout (rl.prompts_per_generate, rl.group_size)",
         "full weights for the sync": "a smaller rl.vllm_memory (FSDP gathers the whole model on each device for it)",
         "reference and teachers": "rl_algo.kl_coef=0, or consolidation.teachers_in_memory=false",
         "inference copy": "rl.inference_copy=off (the HF engine then samples from the fp32 masters)"}
# the transition is the vLLM engine waking beside the trainer: its share of the device is the lever
WHEN = {"transition": "the vLLM engine waking for the weight sync beside the trainer's state; "}


def fix_for(item: str, phase: str, engine: str) -> str:
    """The setting that shrinks `item` in `phase`."""
    vllm = engine == "vllm"
    if item == "engine" and vllm:  # sleeping frees the engine for the update only
        return "rl.vllm_sleep=true, or a smaller rl.vllm_memory" if phase == "update" else "a smaller rl.vllm_memory"
    fix = FIXES[item]
    if phase == "transition" and vllm and "rl.vllm_memory" not in fix:
        fix += ", or a smaller rl.vllm_memory"
    return fix


def refusal(result: dict) -> str:
    """One line: the phase that exceeds the device, its largest item, and the setting to change."""
    phase = result["phase"]
    i = PHASES.index(phase)
    item = max(result["items"], key=lambda k: result["items"][k][i])
    return (f"the memory plan needs {result['peak']:.1f} GiB per device in the {phase} ({WHEN.get(phase, '')}limit "
            f"{HEADROOM:.0%} of {result['device']:.1f} GiB), most of it {item} ({result['items'][item][i]:.1f} GiB): "
            f"set {fix_for(item, phase, result['engine'])}, or plan_only=true to see the whole plan")


def plan_text(result: dict, what: str) -> str:
    rows = [f"memory plan per device for {what} ({result['params'] / 1e9:.2f} B parameters), GiB:",
            f"  {'item':<27}" + "".join(f"{ph:>12}" for ph in PHASES)]
    rows += [f"  {k:<27}" + "".join(f"{v:>12.1f}" for v in phases) for k, phases in result["items"].items()]
    rows += [f"  {'total':<27}" + "".join(f"{result[ph]:>12.1f}" for ph in PHASES),
             f"  device {result['device']:.1f} GiB: {'fits' if result['fits'] else 'does NOT fit'} "
             f"(largest: the {result['phase']}; limit {HEADROOM:.0%}: CUDA context, fragmentation and workspaces "
             "are not counted)"]
    return "\n".join(rows)


def host_gib() -> float:
    """The machine's memory: the device a CPU run trains on."""
    import os

    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB


def cuda_total_gib(device) -> float:
    """The CUDA device's memory as the driver reports it (an H200: about 140 GiB, not its 141 GB label)."""
    import torch

    return torch.cuda.mem_get_info(device)[1] / GIB


def train_job(job: str, conf, policy: str, cuda: bool) -> Job:
    """The Job of chorus.train's `job` (sft | rl | consolidation=opd) under `conf` (TrainConf) for the
    policy checkpoint `policy`, planned as it runs on a GPU (`cuda`: the trainer's default there)."""
    t, rl = conf.trainer, conf.rl
    arch = arch_of(policy)
    checkpointing = t.gradient_checkpointing if t.gradient_checkpointing is not None else cuda
    compute = 2 if "16" in str(t.precision) else 4
    devices = t.devices if isinstance(t.devices, int) and t.devices > 0 else 1
    common = dict(arch=arch, compute_bytes=compute, checkpointing=checkpointing, logit_chunk=t.logit_chunk,
                  shards=devices * t.num_nodes if t.strategy == "fsdp" else 1, ddp_buckets=t.strategy == "ddp",
                  offload=t.strategy == "fsdp" and bool(t.fsdp_cpu_offload))
    if job == "sft":
        s = conf.sft_stage
        return Job(**common, row_tokens=s.max_tokens, completion_tokens=min(s.max_new_tokens, s.max_tokens),
                   micro_rows=s.batch_size, engine="none")
    row = rl.max_prompt_tokens + rl.max_new_tokens
    # rl.micro_batch=null (auto): one row here, then sized by plan_training
    rows = max(1, rl.micro_tokens // row) if rl.micro_tokens else (rl.micro_batch or 1)
    lora = rl.lora.r
    q = arch.heads * arch.head_dim
    share = min(1.0, lora * arch.layers * (2 * arch.hidden + q) * 2 / arch.params) if lora else 1.0  # q and v
    frozen = 0
    reference = job == "rl" and conf.rl_algo.kl_coef > 0 and not lora
    if job == "consolidation":
        cons = conf.consolidation
        n = len(conf.teacher_pool.teachers)
        frozen = n if (cons.teachers_in_memory or str(cons.mode) == "direct") else 1
    from .policy.inference_copy import use_inference_copy

    dtype_bytes = 2 if "16" in conf.model.dtype else 4
    copy = use_inference_copy(rl.inference_copy, engine=rl.engine, device="cuda" if cuda else "cpu",
                              precision=t.precision, model_dtype=conf.model.dtype)
    return Job(**common, row_tokens=row, completion_tokens=rl.max_new_tokens, micro_rows=rows, trainable_share=share,
               reference=reference, frozen_copies=frozen, frozen_bytes=dtype_bytes,
               engine=str(rl.engine), vllm_share=rl.vllm_memory, vllm_sleeps=rl.vllm_sleep,
               rollout_rows=rl.prompts_per_generate * rl.group_size, base_bytes=dtype_bytes if lora else 4,
               copy_bytes=dtype_bytes if copy else 0)


def minibatch_rows(rl) -> int:
    """The rows of one mini-batch of a rollout (rl.prompts_per_step x rl.group_size, cut into
    rl.mini_batches): more rows per pass than that are never run."""
    return -(-rl.prompts_per_step * rl.group_size // max(1, rl.mini_batches))


def sizes_micro_batch(kind: str, rl) -> bool:
    """Whether chorus.train's job `kind` has its rl.micro_batch sized by the plan: RL and OPD with
    rl.micro_batch=null (auto) and no rl.micro_tokens."""
    return kind != "sft" and rl.micro_batch is None and not rl.micro_tokens


def plan_training(kind: str, conf, policy: str, device_gib: float, gpu: bool, label: str = "") -> tuple[dict, str]:
    """The memory plan of chorus.train's job `kind` (sft | rl | consolidation) under `conf` for `policy`
    on a device of `device_gib` (`gpu`: planned as it runs on a GPU), and its text. rl.micro_batch=null
    (RL and OPD, without rl.micro_tokens) is sized here, the most rows that fit (fitting_micro_batch),
    and set in conf.rl; the text says so. Raises one line when the plan does not fit, or when even one
    row per pass does not (PlanRefused: its `text` is the plan, at one row then). `label` names the job
    in the text (default `kind`)."""
    label = label or kind
    job = train_job(kind, conf, policy, cuda=gpu)
    note = ""
    if sizes_micro_batch(kind, conf.rl):
        cap = minibatch_rows(conf.rl)
        rows = fitting_micro_batch(job, device_gib, cap)
        if rows is None:
            result = plan(job, device_gib)
            raise PlanRefused(plan_text(result, f"{label} from {policy} at rl.micro_batch=1"),
                              f"rl.micro_batch=null (auto): not even one row per pass fits: {refusal(result)}")
        conf.rl.micro_batch = rows
        job = dataclasses.replace(job, micro_rows=rows)
        note = (f"\n  rl.micro_batch=null (auto): {rows} rows per pass, the most that fit "
                f"(a mini-batch has {cap}); set rl.micro_batch=N to fix it")
    result = plan(job, device_gib)
    text = plan_text(result, f"{label} from {policy}") + note
    if not result["fits"]:
        raise PlanRefused(text, refusal(result))
    return result, text


class PlanRefused(ValueError):
    """A plan that does not fit: str() is the one-line refusal, `text` the whole plan."""

    def __init__(self, text: str, line: str):
        super().__init__(line)
        self.text = text
