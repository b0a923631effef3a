"""bench/packing.py runs both paths side by side on each batch and they give the same log-probs."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_packing_bench_prints_both_paths_tokens_and_the_null_choice():
    p = subprocess.run([sys.executable, "bench/packing.py", "--size", "xs", "--unequal", "40,6,9", "--equal", "8,8",
                        "--completion", "4", "--repeats", "1"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert re.findall(r"^  (padded|packed): (\d+) tokens", p.stdout, flags=re.M) == [
        ("padded", "120"), ("packed", "55"), ("padded", "16"), ("packed", "16")]  # 3 x 40, 40 + 6 + 9; 2 x 8
    diffs = re.findall(r"largest log-prob difference ([0-9.e+-]+); trainer.pack_sequences=null: (\w+)$", p.stdout,
                       flags=re.M)
    # null packs 55^2 <= 3 x 40^2, not 16^2 > 2 x 8^2
    assert [choice for _, choice in diffs] == ["packed", "padded"] and all(float(d) < 1e-4 for d, _ in diffs)
