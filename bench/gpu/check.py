"""The one-shot GPU check: does chorus's GPU path work? Decided in one run, phase by phase.

    python bench/gpu/check.py --device cuda --size 4b --out gpu_check.json    # on the GPU (bench/gpu/run.sh)
    python bench/gpu/check.py --device cpu --size tiny --out gpu_check.json   # the same path on a CPU

The model is a random-init Qwen3 built from a Qwen3Config (no hub, no tokenizer: the rows are random
token ids): at --size 4b Qwen3-4B's configuration (chorus.memory_plan.KNOWN), at --size tiny a few
hundred thousand parameters. It trains as chorus's RL module trains: fp32 master weights, activation
checkpointing, bf16-mixed autocast (Lightning's precision plugin), the lean log-prob path
(chorus/rl/logprobs.py) through RLModule's own loss, RLModule's AdamW (fused on CUDA).

Phases, in this order (GPU work first, the simulator last):
  A  update memory: one forward/backward of `update_rows` x `update_tokens` tokens and one AdamW step,
     AdamW's state existing during the pass as in every step after a run's first; torch's max
     allocated and max reserved against the memory plan's update phase for the same Job.
  B  vLLM's wake-up: right after A's step (gradients allocated, the cache at its peak) one tensor of
     the engine's share (rl.vllm_memory of the device) is reserved; then the gradients are freed
     (set_to_none) and the cache emptied, and it is reserved again: that one must fit. The first is
     recorded (what the wake would meet without the freeing; RLModule's sync_engine frees the gradients
     and empties the cache before it wakes vLLM, which the second reservation checks).
  C  lean vs full log-probs under bf16-mixed on the same rows (max |diff| at completion positions);
     RLModule's recomputed old log-probs, then its loss on the same rows: the first mini-batch's PPO
     ratio must be 1; a finite loss and gradient norm.
  D  greedy decode tokens/s from the fp32 masters under autocast (how the HF engine samples from the
     trained module) vs a bf16 copy of the same weights: same prompts, same number of new tokens.
  preflight  perl, make and g++ on PATH (the simulator builds with them), recorded as a check.
  E  (--eval N > 0, and only when the preflight passed) a held-out evaluation of N generated test
     designs through chorus.heldout.evaluate_checkpoint, with the tiny xs model (a 4B model would
     need a tokenizer the image does not have): the simulator runs on the GPU image.

The JSON (--out) holds `checks`, a list of {name, value, threshold, pass} (pass null where the value
cannot be measured on this device: CUDA memory on a CPU), and per-phase details; it is rewritten
atomically after every phase, so a run killed half-way keeps what it finished. A phase that raises
(an OOM in A) fails its checks with the error's one line, and the next phases still run. Each check
prints one verdict line; the exit status is 0 whenever the run got through.

Time on an H200 at --size 4b (estimated from FLOPs; no GPU has run this): building the 4.0B-parameter
model on the device ~10 s; A is the old log-probs' forward (2 x params x tokens) and the pass (forward,
recompute, backward: 8 x params x tokens), 10 x 4.0e9 x 65,536 = 2.6e15 FLOP, plus causal attention
(2 x 8192^2 x 4096 per layer and row, x 36 layers x 8 rows x 5 passes = 7.9e14): 3.4e15 FLOP, ~11 s
at 300 TFLOP/s (30 % of the 989 TFLOP/s dense bf16 peak); C is five passes over 4,096 tokens (< 2 s);
D decodes 2 x (4 + 128) steps, host-bound at ~40 ms per step in eager transformers (~11 s): under a
minute for A-D. E runs on the CPU: the tiny model's build (~10 s), then calibration and evaluation of
4 designs, which on a fresh cache first builds the simulator's runtime (2 minutes on a loaded 2-core
CPU here). With the install and imports, ~4 minutes of the 8; run.sh stops check.py at 450 s.
"""
from __future__ import annotations

import argparse
import copy
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
    update_rows: int  # A: rows of the forward/backward (rl.micro_batch's default, 8)
    update_tokens: int  # A: tokens per row, all attended
    update_completion: int  # A: the completion's tokens at the end of each row (the lean head's positions)
    compare_rows: int  # C: rows of the lean-vs-full comparison (the full logits must fit beside the model)
    compare_tokens: int
    compare_completion: int
    decode_rows: int  # D: prompts decoded at once
    prompt_tokens: int
    new_tokens: int


SHAPES = {"4b": Shapes(8, 8192, 4096, 2, 2048, 1024, 8, 128, 128),
          "tiny": Shapes(4, 256, 128, 2, 128, 64, 2, 16, 16)}
LOGIT_CHUNK = 1024  # trainer.logit_chunk's default
ENGINE_SHARE = 0.3  # rl.vllm_memory's default (chorus/config/schema.py)
# C: both paths run the same bf16 body; only the head's GEMM shapes differ (chunked gather vs every
# position), so a logit may round to a neighbouring bf16 value: 1 ulp is 2^-6 = 0.016 for |logit| in
# [2, 4) (random init's logits have std ~1), and a log-prob moves by at most twice a logit's change.
LOGP_DIFF_MAX = 0.05
RATIO_DEV_MAX = 1e-3  # the first mini-batch's |ratio - 1|: the same weights, the same kernels
MAX_EVAL = 10  # test designs among generate_tasks(per_family=8, difficulty=easy)
SIM_TOOLS = ("perl", "make", "g++")  # what the simulator's builds call (verilator's makefiles, its C++)


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
    ap.add_argument("--stall-at", choices=["A", "B", "C", "D", "E"], default=None,
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


def build_module(arch: dict, device, seed: int):
    """RLModule (DAPO, RLConf's defaults) around a random-init Qwen3 of `arch` in fp32 on `device`,
    activation checkpointing on (trainer_setup, as RL turns it on)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    from chorus.config.schema import RLConf, TrainerConf
    from chorus.rl.algos import get_algo
    from chorus.rl.module import Hooks, RLModule
    from chorus.trainer_setup import use_gradient_checkpointing

    config = Qwen3Config(vocab_size=arch["vocab"], hidden_size=arch["hidden"], num_hidden_layers=arch["layers"],
                         num_attention_heads=arch["heads"], num_key_value_heads=arch["kv_heads"],
                         head_dim=arch["head_dim"], intermediate_size=arch["ffn"], tie_word_embeddings=arch["tied"],
                         max_position_embeddings=32768, rms_norm_eps=1e-6,
                         rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
    torch.manual_seed(seed)
    with torch.device(device):  # initialised where it runs: 4B parameters initialise in seconds on a GPU
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    use_gradient_checkpointing(model, TrainerConf(gradient_checkpointing=True))
    module = RLModule(model, get_algo("dapo"), RLConf(), Hooks(rollout=lambda step: None), identity={},
                      logit_chunk=LOGIT_CHUNK)
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

def memory_job(arch: dict, shapes: Shapes):
    from chorus.memory_plan import Arch, Job

    return Job(Arch(**arch), shapes.update_tokens, shapes.update_completion, shapes.update_rows, compute_bytes=2,
               checkpointing=True, logit_chunk=LOGIT_CHUNK, engine="vllm", vllm_share=ENGINE_SHARE, vllm_sleeps=True)


def phase_update(report: Report, details: dict, state: dict) -> None:
    """A: the update's memory against the plan (module docstring)."""
    import torch

    from chorus.memory_plan import GIB, plan

    module, device, shapes, cuda = state["module"], state["device"], state["shapes"], state["cuda"]
    device_gib = torch.cuda.get_device_properties(device).total_memory / GIB if cuda else None
    planned = plan(memory_job(state["arch"], shapes), device_gib or 1.0)
    state["plan"] = planned
    details.update(params=planned["params"], rows=shapes.update_rows, tokens=shapes.update_tokens,
                   plan_update_gib=planned["update"], plan_items_gib={k: v[1] for k, v in planned["items"].items()})
    b = random_batch(shapes.update_rows, shapes.update_tokens, shapes.update_completion, state["arch"]["vocab"],
                     state["seed"])
    module.model.train()
    opt = module.configure_optimizers()["optimizer"]  # RLModule's AdamW: fused on CUDA
    state["optimizer"] = opt
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
    if not cuda:
        report.check("A.update_reserved_over_plan", None, 1.0, None)  # no CUDA allocator on a CPU
        return
    allocated, reserved = (f(device) / GIB for f in (torch.cuda.max_memory_allocated, torch.cuda.max_memory_reserved))
    details.update(max_allocated_gib=allocated, max_reserved_gib=reserved, device_gib=device_gib)
    ratio = reserved / planned["update"]
    report.check("A.update_reserved_over_plan", ratio, 1.0, ratio <= 1.0)


def reserve_fits(nbytes: int, device) -> bool:
    """Whether one tensor of `nbytes` can be allocated on `device` now (then freed again)."""
    import torch

    try:
        block = torch.empty(nbytes, dtype=torch.uint8, device=device)
    except torch.OutOfMemoryError:
        return False
    del block
    return True


def memory_now(device) -> dict:
    """torch's allocated and reserved bytes, and the device's free bytes (what an allocator outside
    torch's cache, like vLLM's, can get), in GiB."""
    import torch

    from chorus.memory_plan import GIB

    free, _ = torch.cuda.mem_get_info(device)
    return {"allocated_gib": torch.cuda.memory_allocated(device) / GIB,
            "reserved_gib": torch.cuda.memory_reserved(device) / GIB, "device_free_gib": free / GIB}


def phase_wakeup(report: Report, details: dict, state: dict) -> None:
    """B: the engine's share, reserved with A's gradients held, then after freeing them (docstring)."""
    import torch

    module, device = state["module"], state["device"]
    if not state["cuda"]:
        module.zero_grad(set_to_none=True)
        report.check("B.engine_share_fits_with_gradients", None, None, None)  # no CUDA memory on a CPU
        report.check("B.engine_share_fits_after_freeing", None, True, None)
        return
    share = int(ENGINE_SHARE * torch.cuda.get_device_properties(device).total_memory)
    details.update(engine_share_gib=share / 2**30, with_gradients=memory_now(device))
    fits_held = reserve_fits(share, device)
    report.check("B.engine_share_fits_with_gradients", fits_held, None, None)  # recorded: the question is after
    module.zero_grad(set_to_none=True)  # what the wake-up does before vLLM allocates
    torch.cuda.empty_cache()
    details["after_freeing"] = memory_now(device)
    fits = reserve_fits(share, device)
    report.check("B.engine_share_fits_after_freeing", fits, True, fits)
    transition = state.get("plan", {}).get("transition")
    if transition is not None:  # the memory plan's wake-up phase, where the plan has one
        details["plan_transition"] = transition


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
    ("A", {"A.update_step_finite": "loss and gradient norm finite", "A.update_reserved_over_plan": 1.0},
     phase_update),
    ("B", {"B.engine_share_fits_with_gradients": None, "B.engine_share_fits_after_freeing": True}, phase_wakeup),
    ("C", {"C.lean_vs_full_logp_max_abs_diff": LOGP_DIFF_MAX, "C.first_minibatch_ratio_dev": RATIO_DEV_MAX,
           "C.loss_and_grad_norm_finite": "finite"}, phase_logprobs),
    ("D", {"D.bf16_copy_over_fp32_autocast_tokens_per_s": 1.0}, phase_decode),
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
        state["module"] = build_module(state["arch"], device, args.seed)
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
