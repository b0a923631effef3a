"""bench/update_memory.py runs both paths side by side and they compute the same loss."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_update_memory_bench_prints_both_paths_with_the_same_loss():
    p = subprocess.run([sys.executable, "bench/update_memory.py", "--vocab", "2048", "--prompt", "64",
                        "--completion", "8"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    losses = re.findall(r"^  (full|lean): peak RSS .* loss (-?[0-9.]+)$", p.stdout, flags=re.M)
    assert [k for k, _ in losses] == ["full", "lean"] and float(losses[0][1]) != 0
    assert abs(float(losses[0][1]) - float(losses[1][1])) < 1e-5
    assert "full / lean: the update's own memory" in p.stdout
