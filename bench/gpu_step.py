"""One DAPO step through chorus on a random-init Qwen3 of a chosen size: throughput, MFU, memory, time split.

    python bench/gpu_step.py --size tiny                       # a few hundred K params, CPU, seconds
    python bench/gpu_step.py --size tiny --vocab 151936 --max-prompt-tokens 1200 --micro-batch 8 --no-compare
                                                               # Qwen3's vocabulary: the update's memory
    python bench/gpu_step.py --size 0.44b --device cuda        # hidden 1024, 28 layers, bf16 on one GPU
    python bench/gpu_step.py --hidden 512 --layers 8 --heads 8 --kv-heads 4 --ffn 1536 --device cuda
    python bench/gpu_step.py --size 0.44b --device cuda --compare-only   # only the generation comparison

The model is built from a Qwen3Config (no hub) with the tiny model's tokenizer (chorus.policy.tiny,
built and cached by build_tiny; --vocab widens the model's vocabulary to Qwen3's 151,936 so that
every cost that scales with it shows, though the tokenizer only names its own 2,048), saved with save_pretrained into the run dir and trained by
chorus.rl.run.train_rl for one step (rl.steps=1; --steps more, the last one measured) on generated
tasks, like any checkpoint.
DAPO's dynamic sampling is turned off: a random model's groups mostly tie, and dropping them would
skip the update this script measures. There is no held-out evaluation unless --eval N (then N test
designs, one sample each, after the last step, on the trainer's device). The memory plan of the
step (chorus/memory_plan.py, for these shapes) is printed beside the measured peak.

The numbers come from what train_rl writes (<out>/steps.jsonl: generation_s, simulation_s, update_s;
<out>/rollouts.jsonl: completion tokens per sample), not from timers inside chorus. The step's wall
time is measured around it (rollout start to the step's log line) and printed beside the split.
  - generation tokens/s = completion tokens generated / generation_s
  - update tokens/s     = (prompt + completion) tokens of the trained samples / update_s
  - MFU = achieved model FLOP/s over --peak-flops: 2 x params x generated tokens for generation (the
    prompt prefill is not counted), 6 x params x trained tokens for the update. params counts every
    parameter once (tied embeddings once); attention FLOPs are left out.
  - peak memory: torch.cuda.max_memory_allocated on cuda, peak RSS of this process on cpu
    (simulation workers are separate processes and not counted).

Before the step (unless --no-compare), the same checkpoint (in --dtype, on --device) generates the
step's batch (its prompts x group size, max_new_tokens, T=1, one seed) through HFEngine twice per
path, side by side in this process: `plain` (dynamic KV cache, eager) and `static` (static KV cache;
on CUDA transformers compiles the decode step, CUDA graphs; on the CPU it decodes eagerly). The
first call of each path is a warm-up, printed apart (static: a whole call, on CUDA the compile;
plain: 8 tokens); the second is timed. Printed: tokens/s of each path = its completion tokens / its timed wall time, and
the ratio static / plain. The two paths need not stop at the same length under sampling, hence
tokens/s, not time. It also replays the plain path's completions through the stop check HFEngine
used before (whole completions decoded every step) and the incremental one (policy/fence_stop.py)
and prints the host time per decode step of each. Last, `plain` once more from float32 weights under
the update's autocast (cast cache off, as Lightning's): how rollouts sampled the fp32 masters before
rl.inference_copy; plain / masters (copy_ratio) is what the bf16 copy gains (only with a 16-bit --dtype). The step itself generates with --generation
(default: rl.generation's, auto = static on CUDA, plain on the CPU).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chorus.core.modes import GenerationMode  # noqa: E402  (an enum only: --help stays fast)

H200_BF16_DENSE = 989e12  # NVIDIA H200 SXM peak dense BF16 tensor-core FLOP/s (no sparsity)

# Model shape and step size per preset; explicit flags override any of them.
SIZES = {
    "tiny": dict(hidden=64, layers=2, heads=2, kv_heads=1, head_dim=32, ffn=128,
                 prompts=2, group_size=4, max_new_tokens=48, micro_batch=8),
    # Qwen3-0.6B's body (head_dim 128) with the tiny tokenizer's small vocabulary: about 0.44B parameters.
    "0.44b": dict(hidden=1024, layers=28, heads=16, kv_heads=8, head_dim=128, ffn=3072,
                  prompts=8, group_size=8, max_new_tokens=512, micro_batch=8),
}


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=sorted(SIZES), default="tiny", help="preset shape and step size")
    for name in ("hidden", "layers", "heads", "kv-heads", "head-dim", "ffn", "prompts", "group-size",
                 "max-new-tokens", "micro-batch"):
        ap.add_argument(f"--{name}", type=int, default=None, help="overrides the preset")
    ap.add_argument("--max-prompt-tokens", type=int, default=1200,
                    help="prompts are shortened to fit (1200 = ports-only prompts, as the tests use)")
    ap.add_argument("--tokenizer", choices=["xs", "s", "m"], default="s", help="tiny model whose tokenizer is used")
    ap.add_argument("--vocab", type=int, default=None,
                    help="the model's vocabulary size (default: the tokenizer's; 151936 = Qwen3's)")
    ap.add_argument("--isolation", choices=["required", "best_effort", "off"], default="required",
                    help="simulator.isolation of the target calibration and the step's simulations (a bare "
                         "GPU image may lack user namespaces, Landlock or seccomp)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--dtype", default=None, help="weights' dtype (default: float32 on cpu, bfloat16 on cuda)")
    ap.add_argument("--precision", default=None,
                    help="Lightning precision of the update (default: bf16-mixed on cuda, 32-true on cpu); the "
                         "policy trains fp32 master weights either way, and the comparison generates under it")
    ap.add_argument("--peak-flops", type=float, default=None,
                    help=f"device peak FLOP/s for MFU (default: {H200_BF16_DENSE:.3g}, H200 dense bf16, on cuda; "
                         "none on cpu, so MFU prints n/a)")
    ap.add_argument("--workers", type=int, default=2, help="parallel simulations")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--generation", choices=[m.value for m in GenerationMode], default=None,
                    help="the step's rl.generation (default: the schema's)")
    ap.add_argument("--no-compare", action="store_true", help="skip the plain-vs-static generation comparison")
    ap.add_argument("--steps", type=int, default=1, help="RL steps; the last one is measured")
    ap.add_argument("--eval", type=int, default=0, help="held-out test designs evaluated after the last step")
    ap.add_argument("--compare-only", action="store_true", help="only the generation comparison, no DAPO step")
    ap.add_argument("--out", default=None, help="run dir (default: a new temporary dir, kept)")
    ap.add_argument("--json", default=None, help="also write the result (the printed JSON) to this file")
    args = ap.parse_args(argv)
    preset = SIZES[args.size]
    for key, value in preset.items():
        if key != "head_dim" and getattr(args, key) is None:
            setattr(args, key, value)
    if args.head_dim is None:  # the preset's, unless hidden or heads changed: then hidden / heads
        same = (args.hidden, args.heads) == (preset["hidden"], preset["heads"])
        args.head_dim = preset["head_dim"] if same else args.hidden // args.heads
    if args.no_compare and args.compare_only:
        ap.error("--no-compare and --compare-only exclude each other")
    args.dtype = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")
    args.precision = args.precision or ("bf16-mixed" if args.device == "cuda" else "32-true")
    if args.peak_flops is None and args.device == "cuda":
        args.peak_flops = H200_BF16_DENSE
    return args


def build_model(args, out: Path) -> tuple[Path, int]:
    """A random-init Qwen3 of the requested shape with the tiny tokenizer, saved as a checkpoint dir."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig, Qwen3Config

    from chorus.policy.tiny import SPECIAL_TOKENS, build_tiny

    tok = AutoTokenizer.from_pretrained(build_tiny(args.tokenizer, seed=0), local_files_only=True)
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    if args.vocab is not None and args.vocab < len(tok):
        raise SystemExit(f"--vocab {args.vocab} is below the tokenizer's {len(tok)} tokens")
    config = Qwen3Config(vocab_size=args.vocab or len(tok), hidden_size=args.hidden, num_hidden_layers=args.layers,
                         num_attention_heads=args.heads, num_key_value_heads=args.kv_heads, head_dim=args.head_dim,
                         intermediate_size=args.ffn, tie_word_embeddings=True, max_position_embeddings=4096,
                         rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                         bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                         pad_token_id=ids["<|pad|>"])
    torch.manual_seed(args.seed)
    model = AutoModelForCausalLM.from_config(config).to(getattr(torch, args.dtype))
    model.generation_config = GenerationConfig(eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
                                               pad_token_id=ids["<|pad|>"])
    path = out / "init"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path, sum(p.numel() for p in model.parameters())


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def fmt_mfu(flops_per_s: float, peak: float | None) -> str:
    return f"{100 * flops_per_s / peak:.2f} %" if peak else "n/a"


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def replay_stop_checks(tok, completions: list[list[int]]) -> tuple[float, float, int]:
    """Host seconds per decode step of the old stop check (every row's whole completion decoded at
    every step) and of FenceStop, replayed over `completions` (finished rows padded, as in generate);
    and the number of steps. Both must agree on every row's stop step (asserted)."""
    from chorus.policy.fence_stop import FenceStop, fence_closed

    steps = max(len(c) for c in completions)
    padded = [c + [tok.pad_token_id] * (steps - len(c)) for c in completions]
    t0 = time.perf_counter()
    old = [[fence_closed(tok.decode(row[:k], skip_special_tokens=True)) for row in padded] for k in range(1, steps + 1)]
    old_s = time.perf_counter() - t0
    state = FenceStop(tok, len(padded))
    t0 = time.perf_counter()
    new = [state.update([row[k] for row in padded]) for k in range(steps)]
    new_s = time.perf_counter() - t0
    first = lambda flags: [next((k for k, f in enumerate(col) if f), None) for col in zip(*flags)]  # noqa: E731
    if first(old) != first(new):
        raise SystemExit("the incremental stop check disagrees with the old one; please report this")
    return old_s / steps, new_s / steps, steps


def autocast(args):
    """The autocast context Lightning's precision plugin enters for --precision on --device."""
    import contextlib

    import torch

    # cast cache off, as Lightning 2.6's MixedPrecision enters it: fp32 weights are cast at every use
    if "bf16" in args.precision:
        return torch.autocast(args.device, dtype=torch.bfloat16, cache_enabled=False)
    if "16" in args.precision and args.device == "cuda":
        return torch.autocast("cuda", dtype=torch.float16, cache_enabled=False)
    return contextlib.nullcontext()


def timed_generation(args, engine, prompts: list[str], params, mode: str) -> tuple[dict, list]:
    """A warm-up call, then the timed one, under the update's autocast. static's warm-up is a whole call of
    the same shapes (on CUDA: the compile and CUDA graph capture for this batch and cache length); plain's
    only loads kernels. Returns the timings and the timed call's generations."""
    warm = params if mode == "static" else dataclasses.replace(params, max_new_tokens=min(8, args.max_new_tokens))
    times, tokens = [], []
    for p in (warm, params):
        _sync(args.device)
        t0 = time.perf_counter()
        with autocast(args):  # as the step generates: under the update's precision
            gens = [g for gs in engine.generate(prompts, n=args.group_size, params=p) for g in gs]
        _sync(args.device)
        times.append(time.perf_counter() - t0)
        tokens.append(sum(len(g.token_ids) for g in gens))
    return {"warmup_s": times[0], "s": times[1], "tokens": tokens[1], "tokens_per_s": tokens[1] / times[1]}, gens


def compare_generation(args, init: Path, tasks) -> dict:
    """plain vs static generation of the step's batch on the same model, side by side (module docstring)."""
    import torch

    from chorus.policy.engines import HFEngine, SamplingParams
    from chorus.policy.models import load_model
    from chorus.policy.prompts import render_prompt

    model, tok = load_model("hf", path=str(init), dtype=args.dtype, device=args.device)
    prompts = [render_prompt(t, "vectors", tok, args.max_prompt_tokens).text for t in tasks[:args.prompts]]
    params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=1.0, seed=args.seed)
    out: dict = {}
    for mode in ("plain", "static"):
        engine = HFEngine(model, tok, generation=mode)  # one torch thread on a CPU, as chorus generates
        out[mode], gens = timed_generation(args, engine, prompts, params, mode)
        if mode == "plain":
            out["completions"] = [g.token_ids for g in gens]
    del model, engine
    # plain again from float32 weights under the same autocast: how rollouts sampled the fp32 masters
    # before rl.inference_copy (each weight cast at every decode step); plain / masters is the copy's gain.
    # With float32 weights there is no copy to compare (rl.inference_copy=auto is off).
    if args.dtype not in ("float32", "fp32"):
        masters, _ = load_model("hf", path=str(init), dtype="float32", device=args.device)
        out["masters"], _ = timed_generation(args, HFEngine(masters, tok, generation="plain"), prompts, params,
                                             "plain")
        out["copy_ratio"] = out["plain"]["tokens_per_s"] / out["masters"]["tokens_per_s"]
        del masters
    if args.device == "cuda":
        torch.cuda.empty_cache()
    old_step, new_step, steps = replay_stop_checks(tok, out.pop("completions"))
    out["ratio"] = out["static"]["tokens_per_s"] / out["plain"]["tokens_per_s"]
    out["stop_check"] = {"old_ms_per_step": 1e3 * old_step, "new_ms_per_step": 1e3 * new_step, "steps": steps}
    rows = len(prompts) * args.group_size
    how = "compiled decode step (CUDA graphs)" if args.device == "cuda" else "eager (no compile off CUDA)"
    print(f"generation side by side: {len(prompts)} prompts x {args.group_size} samples = {rows} rows, "
          f"max_new_tokens {args.max_new_tokens}, T=1, {args.dtype} on {args.device}")
    for mode, what in (("plain", "dynamic KV cache, eager"), ("static", f"static KV cache, {how}")):
        r = out[mode]
        print(f"  {mode} ({what}): {r['tokens']} tokens in {r['s']:.3f} s = {r['tokens_per_s']:.1f} tokens/s "
              f"(warm-up call {r['warmup_s']:.3f} s)")
    print(f"  ratio static / plain: {out['ratio']:.2f}x")
    if "masters" in out:
        r = out["masters"]
        print(f"  masters (plain from float32 weights under {args.precision}, as before rl.inference_copy): "
              f"{r['tokens']} tokens in {r['s']:.3f} s = {r['tokens_per_s']:.1f} tokens/s; "
              f"plain ({args.dtype}, the inference copy) / masters: {out['copy_ratio']:.2f}x")
    sc = out["stop_check"]
    print(f"stop check host time per decode step, replayed over the plain completions ({rows} rows, {steps} steps): "
          f"old {sc['old_ms_per_step']:.3f} ms, incremental {sc['new_ms_per_step']:.3f} ms")
    return out


def main(argv=None) -> dict:
    args = parse_args(argv)
    import torch

    from chorus.config.schema import RLConf, TrainerConf
    from chorus.config.job_context import JobContext
    from chorus.policy.prompts import render_prompt
    from chorus.rl.algos import get_algo
    from chorus.rl.rollouts import collect
    from chorus.rl.run import Objective, train_rl
    from chorus.sim import SimConfig
    from chorus.tasks.generated import calibrate_targets, generate_tasks

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda but torch sees no GPU")
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="chorus-gpu-step-"))
    out.mkdir(parents=True, exist_ok=True)
    run_dir = out / "run"
    if (run_dir / "steps.jsonl").exists():
        raise SystemExit(f"{run_dir} already holds a run; pick another --out")

    t0 = time.monotonic()
    init, n_params = build_model(args, out)
    build_s = time.monotonic() - t0
    tasks = calibrate_targets([t for t in generate_tasks(seed=0, per_family=2, difficulty="easy") if t.split == "train"],
                              isolation=args.isolation)
    compared = None if args.no_compare else compare_generation(args, init, tasks)
    if args.compare_only:
        print(json.dumps({"params": n_params, "generation_compare": compared}))
        return {"params": n_params, "generation_compare": compared}
    algo = get_algo("dapo", dynamic_sampling=False)
    rl = RLConf(steps=args.steps, prompts_per_step=args.prompts, group_size=args.group_size, micro_batch=args.micro_batch,
                max_new_tokens=args.max_new_tokens, max_prompt_tokens=args.max_prompt_tokens, warmup_steps=0,
                eval_every=0, eval_samples=1, save_every=10**9, resume=False,
                **({"generation": args.generation} if args.generation else {}))
    trainer = TrainerConf(name=args.device, accelerator="gpu" if args.device == "cuda" else "cpu",
                          precision=args.precision)
    ctx = JobContext(run_dir, "vectors", SimConfig(isolation=args.isolation), workers=args.workers, seed=args.seed,
                     dtype=args.dtype)

    marks: dict[str, float] = {}

    def timed_collect(*a, **k):  # the step's wall clock starts when its rollout does
        marks["step_start"] = time.monotonic()
        return collect(*a, **k)

    ctx.on_step = lambda step, stats: marks.__setitem__("step_end", time.monotonic())  # the last step's
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.monotonic()
    held_out = calibrate_targets([t for t in generate_tasks(seed=0, per_family=2, difficulty="easy")
                                  if t.split == "test"][:args.eval], isolation=args.isolation) if args.eval else []
    info = train_rl(str(init), algo, tasks, held_out, ctx, rl=rl, trainer=trainer,
                    objective=Objective(collect=timed_collect))
    run_s = time.monotonic() - t0

    step = lines(run_dir / "steps.jsonl")[-1]
    rows = [r for r in lines(run_dir / "rollouts.jsonl") if r["step"] == step["step"]]
    by_id = {t.id: t for t in tasks}
    prompt_tokens = {tid: render_prompt(by_id[tid], "vectors", _tokenizer(init), args.max_prompt_tokens).n_tokens
                     for tid in {r["task_id"] for r in rows}}
    generated = sum(r["completion_tokens"] for r in rows)
    trained = 0 if step.get("update_skipped") else sum(prompt_tokens[r["task_id"]] + r["completion_tokens"]
                                                       for r in rows)
    gen_s, sim_s, upd_s = step["generation_s"], step["simulation_s"], step["update_s"]
    step_s = marks["step_end"] - marks["step_start"]
    gen_tps, upd_tps = generated / gen_s, trained / upd_s
    gen_flops, upd_flops = 2 * n_params * gen_tps, 6 * n_params * upd_tps
    if args.device == "cuda":
        peak_mem, mem_what = torch.cuda.max_memory_allocated(), "torch.cuda.max_memory_allocated"
    else:
        peak_mem, mem_what = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "peak RSS"
    device = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"

    print(f"model: Qwen3 random init, {n_params / 1e6:.3f} M params (hidden {args.hidden}, {args.layers} layers, "
          f"{args.heads} heads / {args.kv_heads} KV, head_dim {args.head_dim}, FFN {args.ffn}, vocab "
          f"{args.vocab or len(_tokenizer(init))}), {args.dtype}, precision {args.precision}, on {device}")
    print(f"step: DAPO, {args.prompts} prompts x {args.group_size} samples, max_new_tokens {args.max_new_tokens}, "
          f"micro_batch {args.micro_batch}; {len(rows)} samples, completion length mean "
          f"{step['completion_len_mean']:.1f} max {step['completion_len_max']}, truncated "
          f"{step['truncated_fraction']:.2f}")
    print(f"generation: {generated} tokens in {gen_s:.3f} s = {gen_tps:.1f} tokens/s, "
          f"{gen_flops / 1e12:.4f} TFLOP/s, MFU {fmt_mfu(gen_flops, args.peak_flops)}")
    print(f"update: {trained} tokens (prompt + completion) in {upd_s:.3f} s = {upd_tps:.1f} tokens/s, "
          f"{upd_flops / 1e12:.4f} TFLOP/s, MFU {fmt_mfu(upd_flops, args.peak_flops)}")
    other = step_s - gen_s - sim_s - upd_s
    print(f"time split: step {step_s:.3f} s = generation {gen_s:.3f} + simulation {sim_s:.3f} + update "
          f"{upd_s:.3f} + other {other:.3f} s")
    print(f"outside the step: model build {build_s:.1f} s; train_rl {run_s:.1f} s in all, {run_s - step_s:.1f} s of it "
          "outside the step (loading, Lightning setup, export)")
    print(f"peak memory ({mem_what}): {peak_mem / 2**30:.3f} GiB")
    planned = memory_plan(args, rl, trainer, args.vocab or len(_tokenizer(init)))
    print(f"memory plan for this step: rollout {planned['rollout']:.3f} GiB, update {planned['update']:.3f} GiB "
          f"(measured peak / planned peak: {peak_mem / 2**30 / planned['peak']:.2f})")
    if args.eval:
        print(f"held-out evaluation after step {args.steps}: {args.eval} designs, pass rate {info['pass_rate']:.3f}, "
              f"mean coverage {info['mean_overall']:.1f} %")
    print(f"peak FLOP/s for MFU: {args.peak_flops:.3g}" if args.peak_flops else "peak FLOP/s for MFU: none given")
    result = {"params": n_params, "generation_tokens_per_s": gen_tps, "update_tokens_per_s": upd_tps,
              "generation_mfu": gen_flops / args.peak_flops if args.peak_flops else None,
              "update_mfu": upd_flops / args.peak_flops if args.peak_flops else None,
              "peak_memory_bytes": peak_mem, "step_s": step_s, "generation_s": gen_s, "simulation_s": sim_s,
              "update_s": upd_s, "generated_tokens": generated, "trained_tokens": trained, "run_dir": str(run_dir),
              "generation_compare": compared, "memory_plan": planned,
              "eval": {"designs": args.eval, "pass_rate": info["pass_rate"], "mean_overall": info["mean_overall"]}
              if args.eval else None}
    print(json.dumps(result))
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "device": device, **result}, indent=1))
    return result


def memory_plan(args, rl, trainer, vocab: int) -> dict:
    """chorus/memory_plan.py's budget for this step's shapes (device size: the GPU's, or 1 GiB on a CPU,
    where only the items are of use). Checkpointing as the step ran it (trainer.gradient_checkpointing:
    null = on CUDA)."""
    import torch

    from chorus.memory_plan import GIB, Arch, Job, plan

    arch = Arch(args.hidden, args.layers, args.heads, args.kv_heads, args.head_dim, args.ffn, vocab)
    checkpointing = args.device == "cuda" if trainer.gradient_checkpointing is None else trainer.gradient_checkpointing
    job = Job(arch, rl.max_prompt_tokens + rl.max_new_tokens, rl.max_new_tokens, rl.micro_batch,
              compute_bytes=2 if "16" in trainer.precision else 4, checkpointing=checkpointing,
              logit_chunk=trainer.logit_chunk, engine="hf", rollout_rows=args.prompts * args.group_size)
    device = torch.cuda.get_device_properties(0).total_memory / GIB if args.device == "cuda" else 1.0
    return plan(job, device)


_TOKENIZERS: dict = {}


def _tokenizer(path: Path):
    from transformers import AutoTokenizer

    if path not in _TOKENIZERS:
        _TOKENIZERS[path] = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return _TOKENIZERS[path]


if __name__ == "__main__":
    main()
