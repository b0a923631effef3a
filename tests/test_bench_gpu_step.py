"""bench/gpu_step.py at the tiny size on CPU: one real DAPO step through chorus, numbers printed."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "gpu_step.py"
NUMBER = r"([0-9.]+)"


@pytest.mark.slow
def test_tiny_cpu_step_prints_positive_throughput_memory_and_a_split_that_adds_up(tiny_xs, cache_root, tmp_path):
    env = {**os.environ, "CHORUS_CACHE_DIR": str(cache_root)}  # the tokenizer of the session's xs model
    p = subprocess.run([sys.executable, str(SCRIPT), "--size", "tiny", "--tokenizer", "xs", "--device", "cpu",
                        "--max-new-tokens", "32", "--out", str(tmp_path / "bench")],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    text = p.stdout

    def number(pattern: str) -> float:
        m = re.search(pattern, text)
        assert m, f"{pattern!r} not in the output:\n{text}"
        return float(m.group(1))

    assert number(rf"generation: \d+ tokens in [0-9.]+ s = {NUMBER} tokens/s") > 0
    # plain and static generation of the same batch, side by side, and their ratio
    plain = number(rf"  plain \(dynamic KV cache, eager\): \d+ tokens in [0-9.]+ s = {NUMBER} tokens/s")
    static = number(rf"  static \(static KV cache, eager \(no compile off CUDA\)\): \d+ tokens in [0-9.]+ s = "
                    rf"{NUMBER} tokens/s")
    assert plain > 0 and static > 0
    assert number(rf"ratio static / plain: {NUMBER}x") == pytest.approx(static / plain, rel=0.01)
    assert number(rf"stop check host time per decode step, .*: old {NUMBER} ms") > 0
    assert number(rf"update: \d+ tokens \(prompt \+ completion\) in [0-9.]+ s = {NUMBER} tokens/s") > 0
    assert number(rf"peak memory \(peak RSS\): {NUMBER} GiB") > 0
    assert "MFU n/a" in text  # no peak FLOP/s is assumed for a CPU
    m = re.search(rf"time split: step {NUMBER} s = generation {NUMBER} \+ simulation {NUMBER} \+ update {NUMBER}",
                  text)
    assert m, text
    step, gen, sim, upd = map(float, m.groups())
    assert gen > 0 and sim >= 0 and upd > 0
    assert abs(step - (gen + sim + upd)) <= max(0.5, 0.15 * step), text
    result = json.loads(text.strip().splitlines()[-1])
    assert result["params"] > 0 and result["trained_tokens"] > result["generated_tokens"] > 0
    compared = result["generation_compare"]
    assert compared["plain"]["tokens"] > 0 and compared["static"]["tokens"] > 0
    assert (tmp_path / "bench/run/steps.jsonl").exists()


def test_cpu_mfu_uses_a_given_peak_and_custom_shapes_derive_head_dim():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import gpu_step
    finally:
        sys.path.remove(str(SCRIPT.parent))
    args = gpu_step.parse_args(["--size", "tiny", "--peak-flops", "1e12"])
    assert args.peak_flops == 1e12 and args.dtype == "float32" and args.head_dim == 32
    big = gpu_step.parse_args(["--size", "0.44b", "--device", "cuda"])
    assert (big.hidden, big.layers, big.heads, big.kv_heads, big.head_dim, big.ffn) == (1024, 28, 16, 8, 128, 3072)
    assert big.peak_flops == gpu_step.H200_BF16_DENSE and big.dtype == "bfloat16"
    assert big.generation is None and not big.no_compare  # the step uses rl.generation's default; compared
    with pytest.raises(SystemExit):
        gpu_step.parse_args(["--no-compare", "--compare-only"])
    custom = gpu_step.parse_args(["--size", "0.44b", "--hidden", "512", "--heads", "8"])
    assert custom.head_dim == 64 and custom.peak_flops is None
    assert gpu_step.fmt_mfu(5e11, 1e12) == "50.00 %" and gpu_step.fmt_mfu(5e11, None) == "n/a"
