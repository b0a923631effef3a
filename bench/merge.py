"""Streaming merge vs mergekit: time and peak RSS merging 3 experts of a random ~0.3B model.

    python bench/merge.py [--hidden 1024 --layers 20 --vocab 32000] [--mergekit /path/to/mergekit-yaml]

Each merge runs in its own process; peak RSS is that process's ru_maxrss. mergekit (LGPL) is only
called as a command when found (`pip install mergekit`); chorus never imports it. Prints one line
per method and tool, then ratios.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file


def make_checkpoints(root: Path, hidden: int, layers: int, vocab: int) -> tuple[Path, list[Path], int]:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = Qwen3Config(hidden_size=hidden, intermediate_size=3 * hidden, num_hidden_layers=layers,
                      num_attention_heads=hidden // 64, num_key_value_heads=max(1, hidden // 256), head_dim=64,
                      vocab_size=vocab, tie_word_embeddings=True, torch_dtype="bfloat16",
                      architectures=["Qwen3ForCausalLM"])
    with torch.device("meta"):
        shapes = {k: v.shape for k, v in Qwen3ForCausalLM(cfg).state_dict().items() if k != "lm_head.weight"}
    g = torch.Generator().manual_seed(0)
    base_sd = {k: (0.02 * torch.randn(s, generator=g)).to(torch.bfloat16) for k, s in shapes.items()}
    paths = []
    for i, name in enumerate(["base", "e0", "e1", "e2"]):
        d = root / name
        d.mkdir(parents=True)
        cfg.save_pretrained(d)
        sd = base_sd if i == 0 else {k: (v.float() + 0.002 * torch.randn(v.shape, generator=g)).to(torch.bfloat16)
                                     for k, v in base_sd.items()}
        save_file(sd, str(d / "model.safetensors"), metadata={"format": "pt"})
        paths.append(d)
    size = (paths[0] / "model.safetensors").stat().st_size
    return paths[0], paths[1:], size


# A fresh parent per measurement: RUSAGE_CHILDREN's peak covers every child a process ever waited for.
WRAP = ("import json, resource, subprocess, sys; p = subprocess.run(json.loads(sys.argv[1]), capture_output=True, "
        "text=True); print(p.stderr[-1500:], file=sys.stderr) if p.returncode else None; "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(p.returncode)")


def timed(cmd: list[str]) -> tuple[float, float]:
    """(seconds, peak RSS in bytes) of a child process."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", WRAP, json.dumps(cmd)], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{cmd[0]} failed:\n{out.stderr}")
    return time.perf_counter() - t0, int(out.stdout.split()[-1]) * 1024


def chorus_cmd(method: str, base: Path, experts: list[Path], out: Path, density: float) -> list[str]:
    code = ("import sys, json; from chorus.merge.stream import merge_checkpoints; a = json.loads(sys.argv[1]); "
            "merge_checkpoints(**a)")
    opts = {"method": method, "experts": [str(e) for e in experts], "out_dir": str(out), "base": str(base)}
    if method != "soup":
        opts["density"] = density
    return [sys.executable, "-c", code, json.dumps(opts)]


def mergekit_cmd(tool: str, method: str, base: Path, experts: list[Path], out: Path, density: float,
                 work: Path) -> list[str]:
    names = {"soup": "linear", "ties": "ties", "dare": "dare_linear", "della": "della_linear"}
    models = [{"model": str(e), "parameters": {"weight": 1.0, **({"density": density} if method != "soup" else {})}}
              for e in experts]
    cfg = {"merge_method": names[method], "models": models, "dtype": "bfloat16",
           "parameters": {"normalize": True}}
    if method != "soup":
        cfg["base_model"] = str(base)
    if method == "della":
        cfg["parameters"].update({"epsilon": 0.1, "lambda": 1.0})
    path = work / f"mk_{method}.yml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    return [tool, str(path), str(out), "--lazy-unpickle", "--allow-crimes"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=20)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--density", type=float, default=0.5)
    ap.add_argument("--methods", default="soup,ties,dare,della")
    ap.add_argument("--mergekit", default=shutil.which("mergekit-yaml"))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="chorus-bench-merge-"))
    try:
        base, experts, size = make_checkpoints(work, args.hidden, args.layers, args.vocab)
        params = sum(v.numel() for v in load_file(str(base / "model.safetensors")).values())
        print(f"model: {params / 1e6:.0f}M parameters, {size / 2**20:.0f} MiB per checkpoint (bf16), 3 experts")
        _, idle = timed([sys.executable, "-c", "import torch, safetensors, chorus.merge.stream"])
        print(f"python + torch + chorus.merge imported, nothing merged: peak RSS {idle / 2**20:.0f} MiB")
        for method in args.methods.split(","):
            cs, cr = timed(chorus_cmd(method, base, experts, work / f"chorus_{method}", args.density))
            print(f"{method:6s} chorus   {cs:7.1f} s  peak RSS {cr / 2**20:7.0f} MiB = {cr / size:.2f}x one model "
                  f"({(cr - idle) / size:.2f}x above the import baseline)")
            if args.mergekit:
                ms, mr = timed(mergekit_cmd(args.mergekit, method, base, experts, work / f"mk_{method}",
                                            args.density, work))
                print(f"{method:6s} mergekit {ms:7.1f} s  peak RSS {mr / 2**20:7.0f} MiB = {mr / size:.2f}x one model "
                      f"({(mr - idle) / size:.2f}x above chorus's import baseline)")
                print(f"{method:6s} speedup_vs_mergekit={ms / cs:.2f} rss_ratio_vs_mergekit={cr / mr:.2f}")
            shutil.rmtree(work / f"chorus_{method}", ignore_errors=True)
            shutil.rmtree(work / f"mk_{method}", ignore_errors=True)
        if not args.mergekit:
            print("mergekit not found (pip install mergekit, or --mergekit PATH): chorus numbers only")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
