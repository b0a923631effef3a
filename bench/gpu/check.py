"""The one-shot GPU check: does chorus's GPU path work? Decided in one run, phase by phase.

    python bench/gpu/check.py --device cuda --size 4b --out gpu_check.json    # on the GPU (bench/gpu/run.sh)
    python bench/gpu/check.py --device cpu --size tiny --out gpu_check.json   # the same path on a CPU

The model is a random-init Qwen3 built from a Qwen3Config (no hub, no tokenizer: the rows are random
token ids): at --size 4b Qwen3-4B's configuration (chorus.memory_plan.KNOWN), at --size tiny a few
hundred thousand parameters. It trains as chorus's RL module trains: fp32 master weights, activation
checkpointing, bf16-mixed autocast (Lightning's precision plugin), the lean log-prob path
(chorus/rl/logprobs.py) through RLModule's own loss, RLModule's AdamW fused (trainer.fused_optimizer=
true, which a GPU run resolves from null).

Rows per pass come from the memory plan for the device found, not a fixed count: `rows` =
memory_plan.fitting_micro_batch(the update's Job, device GiB, cap 8), the most rows of `update_tokens`
tokens (at most a mini-batch's 8, rl's default) whose plan fits. The device GiB: on CUDA
memory_plan.cuda_total_gib (what the driver reports: 79.6 on an 80 GB H100, ~140 on an H200); on the
CPU a stated CPU_DEVICE_GIB. At 4b x 8,192 tokens that is 2 rows on an H100, 8 on an H200; at tiny x 256
tokens on the CPU's stated 0.015 GiB, 2 of 4. Phase A and phase L record the rows chosen.

Phases, in this order (GPU work first, the simulator last), and their checks: each has a threshold
(a stated one, even where the value cannot be measured on this device: then value and pass are null).
  A  update memory: one forward/backward of `rows` x `update_tokens` tokens and one AdamW step, AdamW's
     state existing during the pass as in every step after a run's first; torch's max reserved
     against the memory plan's update phase for the same Job (rows included).
       A.update_step_finite         loss and gradient norm finite
       A.update_reserved_over_plan  measured max reserved / planned update in [0.8, 1.05] (CUDA only)
     The bounds. Upper 1.05: fitting_micro_batch lets a plan reach HEADROOM = 92 % of the device; at
     1.05 x 0.92 = 0.966 torch's cache would hold all but 3.4 % of it (2.7 GiB on an H100), about what
     the CUDA context and the kernels' workspaces outside the cache take: a plan that undercounts by
     more lets a job it passes run out of memory. Lower 0.8: the plan adds the whole gradients (15 GiB
     at 4B) to the whole activations, but in the backward one grows as the other shrinks (each layer's
     gradients appear as its saved input goes), so the true peak is below the plan by up to about the
     smaller of the two: ~0.85-0.9 of the plan at 2 rows on an H100 and at 8 on an H200, before the
     allocator's fragmentation adds to it. Below 0.8 something planned was not there at all (AdamW's
     moments are 30 GiB, over 30 % of the plan; or the pass saved fewer tokens than planned): the
     check measured another job than the plan, or the plan counts memory the job never holds, which
     costs rows that would fit.
  B  vLLM's wake-up: right after A's step the device's free memory (torch.cuda.mem_get_info, what the
     driver reports, which is what vLLM's wake meets: it maps memory outside PyTorch's allocator) is
     recorded with the gradients held; then the gradients are freed (set_to_none) and torch's cache
     emptied, as RLModule's sync_engine does before it wakes vLLM, and the free memory is judged
     against the engine's share, rl.vllm_memory = 0.3 of the device (judge_wake).
       B.device_free_share_after_freeing  free / total device memory >= 0.3 (CUDA only)
     The free share with the gradients held, and whether the share would fit then, are details.
  C  lean vs full log-probs under bf16-mixed on the same rows; RLModule's recomputed old log-probs,
     then its loss on the same rows: the first mini-batch's PPO ratio must be 1.
       C.lean_vs_full_logp_max_abs_diff   max |diff| at completion positions <= 0.05
       C.first_minibatch_ratio_dev        max |ratio - 1| <= 1e-3
       C.loss_and_grad_norm_finite        loss and gradient norm finite
  D  greedy decode tokens/s from the fp32 masters under autocast (how the HF engine samples from the
     trained module) vs a bf16 copy of the same weights: same prompts, same number of new tokens.
       D.bf16_copy_over_fp32_autocast_tokens_per_s  >= 1.0 (CUDA only: on a CPU bf16 is not asked)
  L  two real RL steps through Lightning's loop: chorus's RLModule (DAPO) and trainer_setup.build_trainer
     under bf16-mixed with trainer.fused_optimizer=true, rl.grad_clip=1.0 (clipped through
     chorus/optimizer.clip_grad_norm, as every trainer clips), activation checkpointing on, padded passes
     (trainer.pack_sequences=false: what the plan counts; under sdpa null picks padding for these rows
     too), rl.micro_batch = `rows`. The rollout hook returns a synthetic RolloutBatch of 2 x rows random
     rows of unequal lengths (update_tokens down to update_tokens / (2 rows), right-padded; completion
     masks over the last part of each row; advantages +-ADVANTAGE) in rl.mini_batches = 2: the first
     mini-batch's passes are update_tokens wide, the second's half that, each mini-batch one optimizer
     step (the first through Lightning's strategy, the second through the LightningOptimizer). The
     gradient norm is taken after each backward (Lightning's on_after_backward: the raw norm before
     the clip) and in a step pre-hook on the optimizer (after the clip).
       L.steps_with_finite_loss      rollout steps finished (global_step) with a finite loss == 2
       L.optimizer_fused             the AdamW Lightning stepped has fused=True == true
       L.post_clip_grad_norm_max     max over the optimizer steps of the norm after the clip <= 1.001
       L.raw_grad_norm_min           min over the optimizer steps of the norm before it > 1.0 (else
                                     the clip was never exercised: ADVANTAGE makes the raw norm large)
       L.peak_reserved_over_plan     max reserved in the fit / planned update in [0.8, 1.05] (CUDA only)
     Lightning 2.6 refuses its own clip_gradients for a fused optimizer under bf16-mixed: the crash
     every GPU run had at its first clip. With chorus's clip put back to Lightning's, L fails with it.
  preflight  perl, make and g++ on PATH (the simulator builds with them).
       preflight.simulator_tools     all of perl, make, g++ found
  E  (--eval N > 0, and only when the preflight passed) a held-out evaluation of N generated test
     designs through chorus.heldout.evaluate_checkpoint, with the tiny xs model (a 4B model would
     need a tokenizer the image does not have): the simulator runs on the GPU image.
       E.heldout_designs_scored      designs scored == N

The JSON (--out) holds `checks`, a list of {name, value, threshold, pass} (pass null only where the
value cannot be measured on this device: CUDA memory on a CPU, and D there; Report refuses a check
without a threshold), and per-phase details; it is rewritten atomically after every phase, so a run
killed half-way keeps what it finished. A phase that raises (an OOM in A) fails its checks with the
error's one line, and the next phases still run. Each check prints one verdict line; the exit status
is 0 whenever the run got through.

Time at --size 4b, ESTIMATED from FLOPs (no GPU has run this): a pass of forward, checkpointed
recompute and backward is 8 x params x tokens, the old log-probs' forward 2 x params x tokens, and
causal attention 2 x L^2 x 4096 per layer, row and forward-equivalent (x 36 layers, 5 of them per row).
At 300 TFLOP/s (30 % of the H100/H200's 989 TFLOP/s dense bf16 peak):
  H200 (8 rows): A 10 x 4.02e9 x 65,536 + attention = 3.4e15 FLOP, ~11 s; L two rollouts of 8 rows
    at 8,192 and 8 at 4,096 wide, 9.9e15 FLOP, ~33 s.
  H100 (2 rows): A 8.6e14 FLOP, ~3 s; L 2.5e15 FLOP, ~8 s.
Building the 4.0B-parameter model on the device ~10 s; B ~1 s; C five passes over 4,096 tokens (< 2 s);
D decodes 2 x (4 + 128) steps, host-bound at ~40 ms per step in eager transformers (~11 s); L's
Lightning setup and teardown (the 16 GB of weights copied to the host; AdamW's state is dropped
first) ~10 s. Padded passes run a masked attention kernel, slower than the causal flash one: at
half the rate assumed, A and L take ~90 s on an H200. A-L: ~1.5-2 minutes on an H200, ~1 on an
H100. E runs on the CPU: the tiny model's build (~10 s), then calibration and evaluation of 4 designs,
which on a fresh cache first builds the simulator's runtime (2 minutes on a loaded 2-core CPU here).
With the install (~30 s) and imports (~15 s), ~3.5-5.5 minutes of run.sh's 8; run.sh stops check.py at
450 s, so the whole run stays under 8 minutes even where these estimates are wrong.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import gc
import json
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

# A tiny Qwen3 for the CPU: the 4B path's code on shapes a CPU runs in seconds.
TINY_ARCH = dict(hidden=64, layers=2, heads=2, kv_heads=1, head_dim=32, ffn=128, vocab=2048, tied=True)


@dataclass(frozen=True)
class Shapes:
    """The tokens each phase works on."""
    update_rows: int  # A and L: the most rows per pass (a mini-batch's at rl's defaults); the plan picks how many
    update_tokens: int  # A: tokens per row, all attended (L: its longest row)
    update_completion: int  # A: the completion's tokens at the end of each row (the lean head's positions)
    compare_rows: int  # C: rows of the lean-vs-full comparison (the full logits must fit beside the model)
    compare_tokens: int
    compare_completion: int
    decode_rows: int  # D: prompts decoded at once
    prompt_tokens: int
    new_tokens: int


SHAPES = {"4b": Shapes(8, 8192, 4096, 2, 2048, 1024, 8, 128, 128),
          "tiny": Shapes(4, 256, 128, 2, 128, 64, 2, 16, 16)}
# The CPU's stated device size for the plan (a CPU has no device memory to ask): the tiny plan fits 2 of
# its 4 rows there, as Qwen3-4B's fits 2 of 8 on an 80 GB H100
CPU_DEVICE_GIB = 0.015
LOGIT_CHUNK = 1024  # trainer.logit_chunk's default
ENGINE_SHARE = 0.3  # rl.vllm_memory's default (chorus/config/schema.py)
# A and L: measured max reserved / the plan's update phase (the docstring justifies both bounds)
PLAN_RATIO_BOUNDS = (0.8, 1.05)
# C: both paths run the same bf16 body; only the head's GEMM shapes differ (chunked gather vs every
# position), so a logit may round to a neighbouring bf16 value: 1 ulp is 2^-6 = 0.016 for |logit| in
# [2, 4) (random init's logits have std ~1), and a log-prob moves by at most twice a logit's change.
LOGP_DIFF_MAX = 0.05
RATIO_DEV_MAX = 1e-3  # the first mini-batch's |ratio - 1|: the same weights, the same kernels
L_STEPS = 2  # L: rollouts (Lightning's global_step)
L_MINI_BATCHES = 2  # L: optimizer steps per rollout
CLIP = 1.0  # rl.grad_clip's default
# clip_grad_norm_ scales by CLIP / (norm + 1e-6); the norm taken again over the clipped fp32 gradients
# differs from CLIP by rounding only (1e-6 relative at 4B's 4e9 values): 1e-3 is room, not slack
CLIP_TOL = 1e-3
# L's advantages: at random init a token-mean policy-gradient loss with advantages +-1 has a gradient
# norm of roughly sqrt(hidden) / sqrt(completion tokens) from the head alone (~0.3-0.6 at 4B's token
# counts): below the clip. AdamW's update does not depend on the gradient's scale; the clip does, and
# L.raw_grad_norm_min checks that it was exercised
ADVANTAGE = 100.0
MAX_EVAL = 10  # test designs among generate_tasks(per_family=8, difficulty=easy)
SIM_TOOLS = ("perl", "make", "g++")  # what the simulator's builds call (verilator's makefiles, its C++)
PHASE_NAMES = ("A", "B", "C", "D", "L", "E")


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--size", choices=sorted(SHAPES), default="4b", help="4b: Qwen3-4B's configuration")
    ap.add_argument("--out", required=True, help="the JSON of checks, rewritten after every phase")
    ap.add_argument("--eval", type=int, default=None,
                    help="held-out designs of phase E (default: 4 at --size 4b, 2 at tiny); 0 skips the simulator")
    ap.add_argument("--isolation", choices=["required", "best_effort", "off"], default="best_effort",
                    help="phase E's simulator.isolation (a GPU image may lack user namespaces, Landlock or "
                         "seccomp; the programs are chorus's references and a random model's output)")
    ap.add_argument("--work", default=None, help="phase E's run dir (default: a new temporary dir)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stall-at", choices=PHASE_NAMES, default=None,
                    help="for tests: sleep at the start of this phase (a run killed half-way)")
    args = ap.parse_args(argv)
    if args.size == "4b" and args.device == "cpu":
        ap.error("--size 4b needs --device cuda (64 GiB of weights and AdamW state); use --size tiny on a CPU")
    if args.eval is None:
        args.eval = 4 if args.size == "4b" else 2  # tiny: the CPU run stays well under a minute
    if not 0 <= args.eval <= MAX_EVAL:
        ap.error(f"--eval must be in 0..{MAX_EVAL} (the easy generated test designs at 8 per family), got {args.eval}")
    return args


class Report:
    """The checks and each phase's details, written to `path` atomically after every phase."""

    def __init__(self, path: Path, meta: dict):
        self.path = path
        self.data = {"meta": meta, "checks": [], "phases": {}, "finished": False}
        self.write()

    def check(self, name: str, value, threshold, passed, error: str | None = None) -> None:
        if threshold is None:  # a check that cannot fail is not a check: record a detail instead
            raise ValueError(f"check {name} has no threshold")
        entry = {"name": name, "value": value, "threshold": threshold, "pass": passed}
        if error:
            entry["error"] = error
        self.data["checks"].append(entry)
        verdict = {True: "PASS", False: "FAIL", None: "n/a "}[passed]
        shown = f"{value:.4g}" if isinstance(value, float) else value
        print(f"{verdict} {name}: {shown} (threshold {threshold})" + (f": {error}" if error else ""), flush=True)

    def names(self) -> set[str]:
        return {c["name"] for c in self.data["checks"]}

    def phase(self, name: str, details: dict) -> None:
        self.data["phases"][name] = details
        self.write()

    def write(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str))
        os.replace(tmp, self.path)  # a reader (or a kill) sees the old file or the new one, never half


def one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def run_phase(report: Report, name: str, checks: dict, body, *args) -> None:
    """body(report, details, *args) records `checks` (name -> threshold); if it raises, each check it
    has not recorded fails with the error's one line, and the run goes on to the next phase."""
    details: dict = {}
    t0 = time.monotonic()
    try:
        body(report, details, *args)
    except Exception as e:  # an OOM too: the next phases still run on what memory is left
        error = one_line(e)
        details["error"] = error
        for check, threshold in checks.items():
            if check not in report.names():
                report.check(check, None, threshold, False, error)
    details["s"] = round(time.monotonic() - t0, 3)
    gc.collect()  # the failed frame's tensors go before the next phase allocates
    report.phase(name, details)


# --- the model and chorus's RL module around it ---

def arch_of_size(size: str) -> dict:
    from chorus.memory_plan import KNOWN

    return dict(KNOWN["Qwen/Qwen3-4B"]) if size == "4b" else dict(TINY_ARCH)


def gpu_trainer_conf(device) -> "TrainerConf":
    """The trainer settings of a GPU run, forced on (their null means "as on a GPU"): bf16-mixed, fused
    AdamW, activation checkpointing; padded passes (what the memory plan counts). On `device`'s
    accelerator: the CPU runs the same settings (torch has a fused AdamW for it)."""
    from chorus.config.schema import TrainerConf

    cuda = device.type == "cuda"
    return TrainerConf(name="cuda" if cuda else "cpu", accelerator="gpu" if cuda else "cpu",
                       devices=[device.index or 0] if cuda else 1, precision="bf16-mixed", fused_optimizer=True,
                       gradient_checkpointing=True, pack_sequences=False)


def build_module(arch: dict, device, seed: int, micro_batch: int):
    """RLModule (DAPO, RLConf's defaults, rl.micro_batch = `micro_batch`) around a random-init Qwen3 of
    `arch` in fp32 on `device`, activation checkpointing on and AdamW fused (trainer_setup, as a GPU
    run resolves trainer.gradient_checkpointing and trainer.fused_optimizer)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    from chorus.config.schema import RLConf
    from chorus.rl.algos import get_algo
    from chorus.rl.module import Hooks, RLModule
    from chorus.trainer_setup import fused_optimizer, use_gradient_checkpointing

    config = Qwen3Config(vocab_size=arch["vocab"], hidden_size=arch["hidden"], num_hidden_layers=arch["layers"],
                         num_attention_heads=arch["heads"], num_key_value_heads=arch["kv_heads"],
                         head_dim=arch["head_dim"], intermediate_size=arch["ffn"], tie_word_embeddings=arch["tied"],
                         max_position_embeddings=32768, rms_norm_eps=1e-6,
                         rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
    torch.manual_seed(seed)
    with torch.device(device):  # initialised where it runs: 4B parameters initialise in seconds on a GPU
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    trainer = gpu_trainer_conf(device)
    use_gradient_checkpointing(model, trainer)
    module = RLModule(model, get_algo("dapo"), RLConf(micro_batch=micro_batch), Hooks(rollout=lambda step: None),
                      identity={}, logit_chunk=LOGIT_CHUNK, pack_sequences=trainer.pack_sequences,
                      fused=fused_optimizer(trainer))
    return module.to(device)


def precision_context(device):
    """Lightning's bf16-mixed plugin on `device`, built as chorus builds it (trainer_setup)."""
    from chorus.config.schema import TrainerConf
    from chorus.trainer_setup import evaluation_precision

    return evaluation_precision(TrainerConf(precision="bf16-mixed"), device).forward_context


def random_batch(rows: int, tokens: int, completion: int, vocab: int, seed: int):
    """A RolloutBatch of random ids, every token attended, the last `completion` of each row the
    completion; advantages +1 and -1 in turn (a group that varies, so the loss has a gradient)."""
    import torch

    from chorus.rl.rollouts import RolloutBatch

    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (rows, tokens), generator=gen)
    mask = torch.zeros(rows, tokens, dtype=torch.long)
    mask[:, tokens - completion:] = 1
    adv = torch.tensor([1.0 if i % 2 == 0 else -1.0 for i in range(rows)])
    return RolloutBatch(ids, torch.ones_like(ids), mask, torch.zeros(rows, tokens), adv, rows=[{}] * rows)


def loss_of(module, b, autocast):
    """RLModule's loss of all of b's rows as one micro-batch (one mini-batch: the token-mean normaliser
    is its completion tokens) and the loss's stats."""
    rows = slice(0, b.input_ids.size(0))
    ids, attn, mask = module._rows(b, rows, module.device)
    with autocast():
        fwd = module._forward(module.model, ids, attn, mask, with_entropy=True)
        return module.micro_loss(b, rows, ids, attn, mask, fwd, float(mask.sum()))


# --- the phases ---

def memory_job(arch: dict, shapes: Shapes, rows: int | None = None):
    """The memory plan's Job of the update (A's, and L's longest pass): `rows` x update_tokens per pass
    (default: the cap, update_rows), bf16-mixed, checkpointed, a sleeping vLLM engine of ENGINE_SHARE."""
    from chorus.memory_plan import Arch, Job

    return Job(Arch(**arch), shapes.update_tokens, shapes.update_completion, rows or shapes.update_rows,
               compute_bytes=2, checkpointing=True, logit_chunk=LOGIT_CHUNK, engine="vllm", vllm_share=ENGINE_SHARE,
               vllm_sleeps=True)


def device_gib(device) -> float:
    """The device's memory for the plan: the driver's total on CUDA, CPU_DEVICE_GIB on the CPU."""
    from chorus.memory_plan import cuda_total_gib

    return cuda_total_gib(device) if device.type == "cuda" else CPU_DEVICE_GIB


def plan_rows(arch: dict, shapes: Shapes, gib: float) -> int:
    """The rows per pass the memory plan fits on `gib` (at most update_rows); one line when not one does."""
    from chorus.memory_plan import fitting_micro_batch, plan, refusal

    job = memory_job(arch, shapes)
    rows = fitting_micro_batch(job, gib, cap=shapes.update_rows)
    if rows is None:
        raise ValueError(f"not even one row of {shapes.update_tokens} tokens fits: {refusal(plan(job, gib))}")
    return rows


# --- the judges: pure functions of measured numbers, (value, pass) ---

def judge_plan_ratio(measured_gib: float, planned_gib: float, bounds=PLAN_RATIO_BOUNDS) -> tuple[float, bool]:
    """Measured memory over the plan's, within `bounds` on both sides (the docstring says why)."""
    ratio = measured_gib / planned_gib
    return ratio, bool(bounds[0] <= ratio <= bounds[1])


def judge_wake(free_bytes: int, total_bytes: int, share: float = ENGINE_SHARE) -> tuple[float, bool]:
    """The device's free share (torch.cuda.mem_get_info's free / total) against the engine's share:
    vLLM's wake maps its share outside torch's allocator, so only memory the driver calls free counts."""
    free = free_bytes / total_bytes
    return free, bool(free >= share)


def judge_clip(raw: list[float], post: list[float], clip: float = CLIP,
               tol: float = CLIP_TOL) -> tuple[tuple[float | None, bool], tuple[float | None, bool]]:
    """The clip over the optimizer steps (`raw`: each step's gradient norm before the clip, `post`:
    after it): (the largest norm after, <= clip x (1 + tol)) and (the smallest before, > clip: the clip
    had to act at every step). No step at all fails both."""
    if not post or not raw or None in raw:
        return (max(post) if post else None, False), (None, False)
    held, acted = max(post), min(raw)
    return (held, bool(math.isfinite(held) and held <= clip * (1 + tol))), (acted, bool(acted > clip))


def phase_update(report: Report, details: dict, state: dict) -> None:
    """A: the update's memory against the plan (module docstring)."""
    import torch

    from chorus.memory_plan import GIB, plan

    module, device, shapes, cuda = state["module"], state["device"], state["shapes"], state["cuda"]
    gib = device_gib(device)
    rows = state["rows"] = plan_rows(state["arch"], shapes, gib)
    planned = plan(memory_job(state["arch"], shapes, rows), gib)
    state["plan"] = planned
    details.update(params=planned["params"], device_gib=gib, rows=rows, rows_cap=shapes.update_rows,
                   tokens=shapes.update_tokens, plan_update_gib=planned["update"],
                   plan_items_gib={k: v[1] for k, v in planned["items"].items()})
    b = random_batch(rows, shapes.update_tokens, shapes.update_completion, state["arch"]["vocab"], state["seed"])
    module.model.train()
    opt = module.configure_optimizers()["optimizer"]  # RLModule's AdamW: fused
    state["optimizer"] = opt
    details["fused"] = bool(opt.defaults.get("fused"))
    # AdamW's moments exist during every pass after a run's first: create them with a zero step (zero
    # gradients, no weight decay: the weights do not move), so the peak is the steady state the plan counts
    for p in module.model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    opt.zero_grad(set_to_none=True)
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.monotonic()
    with state["autocast"]():  # the step's own old log-probs (no gradient), as RLModule.training_step
        module._recompute_old_logprobs(b)
    loss, _ = loss_of(module, b, state["autocast"])
    loss.backward()
    grad_norm = module._grad_norm()
    opt.step()
    if cuda:
        torch.cuda.synchronize(device)
    details.update(step_s=time.monotonic() - t0, loss=float(loss.detach()), grad_norm=grad_norm)
    del loss
    finite = math.isfinite(details["loss"]) and math.isfinite(grad_norm)
    report.check("A.update_step_finite", grad_norm, "loss and gradient norm finite", finite)
    if not cuda:  # no CUDA allocator on a CPU
        report.check("A.update_reserved_over_plan", None, list(PLAN_RATIO_BOUNDS), None)
        return
    allocated, reserved = (f(device) / GIB for f in (torch.cuda.max_memory_allocated, torch.cuda.max_memory_reserved))
    details.update(max_allocated_gib=allocated, max_reserved_gib=reserved)
    ratio, ok = judge_plan_ratio(reserved, planned["update"])
    report.check("A.update_reserved_over_plan", ratio, list(PLAN_RATIO_BOUNDS), ok)


def memory_now(device) -> dict:
    """torch's allocated and reserved memory, and the device's free memory as the driver reports it (what
    an allocator outside torch's cache, like vLLM's, can get), in GiB."""
    import torch

    from chorus.memory_plan import GIB

    free, total = torch.cuda.mem_get_info(device)
    return {"allocated_gib": torch.cuda.memory_allocated(device) / GIB,
            "reserved_gib": torch.cuda.memory_reserved(device) / GIB, "device_free_gib": free / GIB,
            "device_total_gib": total / GIB, "device_free_share": free / total}


def phase_wakeup(report: Report, details: dict, state: dict) -> None:
    """B: the device's free memory after A's step, with the gradients held, then after freeing them and
    emptying the cache (what sync_engine does before vLLM wakes), against the engine's share."""
    import torch

    module, device = state["module"], state["device"]
    details["engine_share"] = ENGINE_SHARE
    if not state["cuda"]:  # no device memory on a CPU
        module.zero_grad(set_to_none=True)
        report.check("B.device_free_share_after_freeing", None, ENGINE_SHARE, None)
        return
    torch.cuda.synchronize(device)
    held = details["with_gradients"] = memory_now(device)
    # recorded, not judged: the wake never meets this state (sync_engine frees first)
    details["engine_share_fits_with_gradients"] = held["device_free_share"] >= ENGINE_SHARE
    module.zero_grad(set_to_none=True)  # what the wake-up does before vLLM allocates
    torch.cuda.empty_cache()
    torch.cuda.synchronize(device)
    details["after_freeing"] = memory_now(device)
    free, total = torch.cuda.mem_get_info(device)
    share, ok = judge_wake(free, total)
    report.check("B.device_free_share_after_freeing", share, ENGINE_SHARE, ok)
    transition = state.get("plan", {}).get("transition")
    if transition is not None:  # the memory plan's wake-up phase, where the plan has one
        details["plan_transition_gib"] = transition


def phase_logprobs(report: Report, details: dict, state: dict) -> None:
    """C: lean vs full log-probs; RLModule's old log-probs and first mini-batch ratio (docstring)."""
    import torch

    from chorus.rl.logprobs import forward_logprobs
    from chorus.rl.losses import token_logprobs

    state.pop("optimizer", None)  # A's AdamW state (B has measured with it)
    module, shapes, autocast = state["module"], state["shapes"], state["autocast"]
    _free(state)
    model = module.model
    model.train()  # the update's mode (checkpointing runs only in train mode)
    b = random_batch(shapes.compare_rows, shapes.compare_tokens, shapes.compare_completion, state["arch"]["vocab"],
                     state["seed"] + 1)
    ids, attn, mask = module._rows(b, slice(0, b.input_ids.size(0)), module.device)
    with torch.no_grad(), autocast():
        lean = forward_logprobs(model, ids, attn, mask, chunk=LOGIT_CHUNK).logp
        full, _ = token_logprobs(model(input_ids=ids, attention_mask=attn).logits, ids)
    wanted = mask.bool()
    diff = float((lean - full).abs()[wanted].max())
    details.update(rows=shapes.compare_rows, tokens=shapes.compare_tokens, positions=int(wanted.sum()),
                   lean_logp_mean=float(lean[wanted].mean()))
    del full, lean
    report.check("C.lean_vs_full_logp_max_abs_diff", diff, LOGP_DIFF_MAX, math.isfinite(diff) and diff <= LOGP_DIFF_MAX)
    with autocast():  # the trainer's own old log-probs, as RLModule.training_step recomputes them
        details["old_logprob_gap"] = module._recompute_old_logprobs(b)
    loss, stats = loss_of(module, b, autocast)
    loss.backward()
    grad_norm = module._grad_norm()
    module.zero_grad(set_to_none=True)
    dev = stats["ratio_dev_max"]
    report.check("C.first_minibatch_ratio_dev", dev, RATIO_DEV_MAX, dev <= RATIO_DEV_MAX)
    details.update(loss=float(loss.detach()), grad_norm=grad_norm)
    report.check("C.loss_and_grad_norm_finite", grad_norm, "finite",
                 math.isfinite(details["loss"]) and math.isfinite(grad_norm))


def _free(state: dict) -> None:
    """Drop an earlier phase's gradients (a phase that failed half-way may have left them: C's backward
    would add to them, D's deepcopy would copy them) and torch's cached blocks."""
    import torch

    if "module" in state:
        state["module"].zero_grad(set_to_none=True)
    gc.collect()
    if state["cuda"]:
        torch.cuda.empty_cache()


def decode_rate(model, prompts, new_tokens: int, context, device) -> tuple[float, "object"]:
    """Tokens/s of a greedy decode of exactly `new_tokens` per row (after a short warm-up call), and
    the generated ids."""
    import torch

    kwargs = dict(attention_mask=torch.ones_like(prompts), do_sample=False, pad_token_id=0, eos_token_id=None)
    with torch.no_grad(), context():
        model.generate(prompts, max_new_tokens=4, min_new_tokens=4, **kwargs)  # kernels, allocator
        _sync(device)
        t0 = time.perf_counter()
        out = model.generate(prompts, max_new_tokens=new_tokens, min_new_tokens=new_tokens, **kwargs)
        _sync(device)
    seconds = time.perf_counter() - t0
    generated = out[:, prompts.size(1):]
    return generated.numel() / seconds, generated


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def phase_decode(report: Report, details: dict, state: dict) -> None:
    """D: fp32 masters under autocast vs a bf16 copy, greedy, same prompts and length (docstring)."""
    import contextlib

    import torch

    from chorus.policy.engines import generation_threads

    module, shapes, device = state["module"], state["shapes"], state["device"]
    _free(state)
    threads = generation_threads(device, 1)  # one torch thread on a CPU, as chorus's HF engine generates
    if threads:
        torch.set_num_threads(threads)
    model = module.model.eval()
    gen = torch.Generator().manual_seed(state["seed"] + 2)
    prompts = torch.randint(0, state["arch"]["vocab"], (shapes.decode_rows, shapes.prompt_tokens),
                            generator=gen).to(device)
    masters, masters_ids = decode_rate(model, prompts, shapes.new_tokens, state["autocast"], device)
    copy_ = copy.deepcopy(model).to(torch.bfloat16)
    bf16, bf16_ids = decode_rate(copy_, prompts, shapes.new_tokens, contextlib.nullcontext, device)
    del copy_
    ratio = bf16 / masters
    details.update(rows=shapes.decode_rows, prompt_tokens=shapes.prompt_tokens, new_tokens=shapes.new_tokens,
                   fp32_autocast_tokens_per_s=masters, bf16_copy_tokens_per_s=bf16,
                   same_tokens_share=float((masters_ids == bf16_ids).float().mean()))
    # on a CPU bf16 kernels are not what is asked: the value is recorded, not judged
    report.check("D.bf16_copy_over_fp32_autocast_tokens_per_s", ratio, 1.0, ratio >= 1.0 if state["cuda"] else None)


def rollout_batch(micro_rows: int, tokens: int, completion: int, vocab: int, seed: int):
    """L's synthetic rollout: 2 x `micro_rows` rows of random ids, of lengths from `tokens` down to
    tokens / (2 x micro_rows) (the first mini-batch's rows longer than half, the second's at most half),
    right-padded; each row's completion its last `completion` / `tokens` share; advantages +-ADVANTAGE
    in turn."""
    import torch

    from chorus.rl.rollouts import RolloutBatch

    rows = 2 * micro_rows
    lengths = [tokens - i * tokens // rows for i in range(rows)]
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (rows, tokens), generator=gen)
    attn = torch.zeros(rows, tokens, dtype=torch.long)
    mask = torch.zeros(rows, tokens, dtype=torch.long)
    for row, n in enumerate(lengths):
        attn[row, :n] = 1
        mask[row, n - max(1, n * completion // tokens):n] = 1
    ids = ids * attn  # padding: id 0, never attended
    adv = torch.tensor([ADVANTAGE if i % 2 == 0 else -ADVANTAGE for i in range(rows)])
    return RolloutBatch(ids, attn, mask, torch.zeros(rows, tokens), adv, rows=[{}] * rows, stats={})


def _grad_norm(params) -> float:
    """The total norm of the gradients `params` hold (what clip_grad_norm_ computes)."""
    import torch

    norms = [p.grad.detach().float().norm() for p in params if p.grad is not None]
    return float(torch.linalg.vector_norm(torch.stack(norms))) if norms else 0.0


def _probe():
    """A Lightning callback that records, per optimizer step, the gradient norm before the clip (after
    each backward: the last one before a step is the step's whole gradient) and after it (a step
    pre-hook on the optimizer Lightning built), and whether that optimizer is fused."""
    import lightning as L

    class Probe(L.Callback):
        def __init__(self):
            self.raw, self.post, self.last_raw, self.fused = [], [], None, None

        def on_train_start(self, trainer, module):
            opt = trainer.optimizers[0]
            self.fused = bool(opt.defaults.get("fused"))
            opt.register_step_pre_hook(self._before_step)

        def on_after_backward(self, trainer, module):
            self.last_raw = _grad_norm(module.model.parameters())

        def _before_step(self, opt, args, kwargs):
            self.raw.append(self.last_raw)
            self.post.append(_grad_norm(p for group in opt.param_groups for p in group["params"]))

        def on_train_end(self, trainer, module):
            for opt in trainer.optimizers:  # nothing after L needs AdamW's state: teardown need not copy it
                opt.state.clear()

    return Probe()


def checkpointing_on(model) -> bool:
    """Whether transformers has activation checkpointing on for `model` (renamed in transformers 5.2)."""
    flag = "is_activation_checkpointing" if hasattr(type(model), "is_activation_checkpointing") else \
        "is_gradient_checkpointing"
    return bool(getattr(model, flag, False))


def phase_lightning(report: Report, details: dict, state: dict) -> None:
    """L: two RL steps of chorus's RLModule through Lightning's loop (docstring)."""
    import warnings

    import torch

    from chorus.config.schema import RLConf
    from chorus.memory_plan import GIB, plan
    from chorus.rl.algos import get_algo
    from chorus.rl.module import Hooks, RLModule
    from chorus.trainer_setup import build_trainer, fused_optimizer, lightning_errors

    module, device, shapes, cuda = state["module"], state["device"], state["shapes"], state["cuda"]
    state.pop("optimizer", None)
    _free(state)
    gib = device_gib(device)
    rows = state.get("rows") or plan_rows(state["arch"], shapes, gib)  # A's, or found here if A failed first
    planned = plan(memory_job(state["arch"], shapes, rows), gib)
    model = module.model
    tconf = gpu_trainer_conf(device)
    rl = RLConf(micro_batch=rows, mini_batches=L_MINI_BATCHES, epochs=1, grad_clip=CLIP, warmup_steps=1,
                max_new_tokens=shapes.update_completion, temperature=1.0)
    template = rollout_batch(rows, shapes.update_tokens, shapes.update_completion, state["arch"]["vocab"],
                             state["seed"] + 3)
    lengths = template.attention_mask.sum(-1).tolist()
    details.update(device_gib=gib, rows_per_pass=rows, rows=len(lengths), lengths=lengths,
                   completion_tokens=template.completion_mask.sum(-1).tolist(), mini_batches=L_MINI_BATCHES,
                   grad_clip=CLIP, advantage=ADVANTAGE, precision=tconf.precision,
                   activation_checkpointing=checkpointing_on(model),
                   pack_sequences=tconf.pack_sequences, plan_update_gib=planned["update"])
    seen = []

    def rollout(step):  # a fresh copy each step: the module replaces its old log-probs
        return dataclasses.replace(template, old_logprobs=template.old_logprobs.clone(), stats={})

    model.train()  # as RLModule leaves it after each rollout (D left it in eval mode)
    hooks = Hooks(rollout=rollout, on_step=lambda step, b, stats: seen.append(dict(stats)))
    lmodule = RLModule(model, get_algo("dapo"), rl, hooks, identity={}, logit_chunk=LOGIT_CHUNK,
                       pack_sequences=tconf.pack_sequences, fused=fused_optimizer(tconf))
    probe = _probe()
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="chorus-gpu-check-L-") as root, warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        trainer = build_trainer(tconf, max_steps=L_STEPS, callbacks=[probe], logger=False, enable_checkpointing=False,
                                default_root_dir=root, limit_val_batches=0, num_sanity_val_steps=0)
        data = torch.utils.data.DataLoader(list(range(10 * L_STEPS)), batch_size=1)
        try:
            with lightning_errors():
                trainer.fit(lmodule, train_dataloaders=data)
        finally:  # what the steps before an error recorded
            details.update(global_step=trainer.global_step, losses=[s.get("loss") for s in seen],
                           raw_grad_norms=probe.raw, post_clip_grad_norms=probe.post,
                           optimizer_steps=len(probe.post), ratio_dev_first=[s.get("ratio_dev_first") for s in seen])
    details["fit_s"] = time.monotonic() - t0
    finite = sum(1 for s in seen if math.isfinite(s.get("loss", math.nan)))
    report.check("L.steps_with_finite_loss", finite, L_STEPS, finite == L_STEPS and trainer.global_step == L_STEPS)
    report.check("L.optimizer_fused", probe.fused, True, probe.fused is True)
    (held, held_ok), (acted, acted_ok) = judge_clip(probe.raw, probe.post)
    report.check("L.post_clip_grad_norm_max", held, CLIP * (1 + CLIP_TOL), held_ok)
    report.check("L.raw_grad_norm_min", acted, CLIP, acted_ok)
    if not cuda:  # no CUDA allocator on a CPU
        report.check("L.peak_reserved_over_plan", None, list(PLAN_RATIO_BOUNDS), None)
        return
    reserved = torch.cuda.max_memory_reserved(device) / GIB
    details.update(max_reserved_gib=reserved, max_allocated_gib=torch.cuda.max_memory_allocated(device) / GIB)
    ratio, ok = judge_plan_ratio(reserved, planned["update"])
    report.check("L.peak_reserved_over_plan", ratio, list(PLAN_RATIO_BOUNDS), ok)


def phase_preflight(report: Report, details: dict, state: dict) -> None:
    """The simulator's build tools, before anything calls them."""
    found = {tool: shutil.which(tool) for tool in SIM_TOOLS}
    details["tools"] = found
    missing = [tool for tool, path in found.items() if path is None]
    state["sim_ready"] = not missing
    report.check("preflight.simulator_tools", "missing " + ", ".join(missing) if missing else "all found",
                 " ".join(SIM_TOOLS), not missing)


def phase_heldout(report: Report, details: dict, state: dict, args) -> None:
    """E: chorus's held-out evaluation of the tiny xs model on `args.eval` generated test designs."""
    from chorus.config.job_context import JobContext
    from chorus.config.schema import RLConf, TrainerConf
    from chorus.heldout import evaluate_checkpoint
    from chorus.policy.tiny import build_tiny
    from chorus.sim import SimConfig
    from chorus.tasks.generated import calibrate_targets, generate_tasks

    _free(state)
    designs = [t for t in generate_tasks(seed=0, per_family=8, difficulty="easy") if t.split == "test"][:args.eval]
    tasks = calibrate_targets(designs, workers=2, isolation=args.isolation)
    rl = RLConf(max_new_tokens=64, max_prompt_tokens=1200, eval_samples=1)
    out = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="chorus-gpu-check-"))
    ctx = JobContext(out / "eval", "vectors", SimConfig(isolation=args.isolation), workers=2, seed=args.seed)
    trainer = (TrainerConf(name="cuda", accelerator="gpu", precision="bf16-mixed") if state["cuda"]
               else TrainerConf())
    summary = evaluate_checkpoint(str(build_tiny("xs", seed=0)), tasks, rl, ctx, trainer=trainer)
    details.update(run_dir=str(out / "eval"), n_tasks=summary["n_tasks"], n_samples=summary["n_samples"],
                   pass_rate=summary["pass_rate"], mean_overall=summary["mean_overall"])
    report.check("E.heldout_designs_scored", summary["n_tasks"], args.eval, summary["n_tasks"] == args.eval)


PHASES = [  # (name, its checks and their thresholds, body)
    ("A", {"A.update_step_finite": "loss and gradient norm finite",
           "A.update_reserved_over_plan": list(PLAN_RATIO_BOUNDS)}, phase_update),
    ("B", {"B.device_free_share_after_freeing": ENGINE_SHARE}, phase_wakeup),
    ("C", {"C.lean_vs_full_logp_max_abs_diff": LOGP_DIFF_MAX, "C.first_minibatch_ratio_dev": RATIO_DEV_MAX,
           "C.loss_and_grad_norm_finite": "finite"}, phase_logprobs),
    ("D", {"D.bf16_copy_over_fp32_autocast_tokens_per_s": 1.0}, phase_decode),
    ("L", {"L.steps_with_finite_loss": L_STEPS, "L.optimizer_fused": True,
           "L.post_clip_grad_norm_max": CLIP * (1 + CLIP_TOL), "L.raw_grad_norm_min": CLIP,
           "L.peak_reserved_over_plan": list(PLAN_RATIO_BOUNDS)}, phase_lightning),
]


def stall_if_asked(args, phase: str) -> None:
    if args.stall_at == phase:
        print(f"stalling at phase {phase} (--stall-at)", flush=True)
        time.sleep(3600)


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch
    import transformers

    if args.device == "cuda" and not torch.cuda.is_available():
        print("check.py: --device cuda but torch sees no GPU; use --device cpu --size tiny", file=sys.stderr)
        return 2
    device = torch.device(args.device, 0) if args.device == "cuda" else torch.device("cpu")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"device": torch.cuda.get_device_name(device) if args.device == "cuda" else "cpu", "size": args.size,
            "torch": torch.__version__, "transformers": transformers.__version__, "args": vars(args)}
    report = Report(out, meta)
    state = {"device": device, "cuda": args.device == "cuda", "shapes": SHAPES[args.size], "seed": args.seed,
             "arch": arch_of_size(args.size), "autocast": precision_context(device)}
    t0 = time.monotonic()
    try:
        state["module"] = build_module(state["arch"], device, args.seed, state["shapes"].update_rows)
    except Exception as e:  # nothing of A-D can run without the model: each of their checks fails with why
        for name, checks, _ in PHASES:
            for check, threshold in checks.items():
                report.check(check, None, threshold, False, f"model not built: {one_line(e)}")
    report.phase("build", {"s": round(time.monotonic() - t0, 3), "arch": state["arch"]})
    if "module" in state:
        for name, checks, body in PHASES:
            stall_if_asked(args, name)
            run_phase(report, name, checks, body, state)
        state.pop("module")
    run_phase(report, "preflight", {"preflight.simulator_tools": " ".join(SIM_TOOLS)}, phase_preflight, state)
    if args.eval and state.get("sim_ready"):
        stall_if_asked(args, "E")
        run_phase(report, "E", {"E.heldout_designs_scored": args.eval}, phase_heldout, state, args)
    report.data["finished"] = True
    report.write()
    counts = {v: sum(c["pass"] is v for c in report.data["checks"]) for v in (True, False, None)}
    print(f"verdict: {counts[True]} pass, {counts[False]} fail, {counts[None]} not measured here; {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
