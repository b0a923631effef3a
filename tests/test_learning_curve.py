"""An RL run's held-out learning curve and the RL length a study fixes from it (analyze curve=)."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from chorus.analysis import learning_curve as lc
from chorus.tracking.run_dir import PARQUET, SUMMARY

REPO = Path(__file__).resolve().parent.parent


def evaluation(d: Path, rates: np.ndarray, rng, samples: int = 8, **summary) -> None:
    passed = rng.random((len(rates), samples)) < rates[:, None]
    d.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"task_id": np.repeat([f"t{i:03d}" for i in range(len(rates))], samples),
                  "passed": passed.ravel(), "overall": np.where(passed.ravel(), 90.0, 40.0)}).to_parquet(d / PARQUET)
    (d / SUMMARY).write_text(json.dumps({"pass_rate": float(passed.mean()), **summary}))


def rl_run(root: Path, levels: dict[int, float], T: int = 120, seed: int = 0) -> Path:
    """An RL run of max(levels) steps evaluated at every other key: each task's rate is its own
    difficulty shifted by the step's level (so steps are paired over tasks, as real ones are)."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(-0.25, 0.25, T)
    last = max(levels)
    for step, level in levels.items():
        rates = np.clip(base + level, 0, 1)
        if step == last:
            evaluation(root, rates, rng, job="rl", steps=last)
        else:
            evaluation(root / "eval" / f"step_{step}", rates, rng)
    return root


def test_the_length_is_the_earliest_step_not_worse_than_the_best(tmp_path):
    # 20 % at step 8, 45 % at 16, 46 % at 24, 44 % at 32: steps 16-32 are within noise of each other
    # (120 tasks x 8 samples: a paired sd of about 1.5 points), step 8 is 25 points behind
    run = rl_run(tmp_path / "run", {8: 0.20, 16: 0.45, 24: 0.46, 32: 0.44})
    c = lc.curve(run, n_boot=500)
    assert [r["step"] for r in c["rows"]] == [8, 16, 24, 32]
    assert c["rows"][0]["behind_lo"] > 15  # clearly worse than the best
    assert c["chosen"] == 16 and c["best"] in (16, 24, 32)
    assert abs(c["rows"][1]["pass_at_1"] - 45) < 7  # 120 tasks x 8 samples: sd about 2.5 points
    text = lc.markdown(c)
    assert "chosen length (earliest step not worse than the best): 16" in text


def test_analyze_curve_prints_and_writes_the_curve(tmp_path):
    run = rl_run(tmp_path / "run", {8: 0.1, 16: 0.5})
    p = subprocess.run([sys.executable, "-m", "chorus.analyze", f"curve={run}", f"out={tmp_path / 'out'}"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr
    assert "| 8 | " in p.stdout and "chosen length (earliest step not worse than the best): 16" in p.stdout
    saved = json.loads((tmp_path / "out/curve.json").read_text())
    assert saved["chosen"] == 16 and (tmp_path / "out/curve.png").stat().st_size > 1000


@pytest.mark.parametrize("make, message", [
    (lambda d: None, "summary.json"),
    (lambda d: evaluation(d, np.full(5, 0.5), np.random.default_rng(0), job="sft"), "not an RL run"),
    (lambda d: evaluation(d, np.full(5, 0.5), np.random.default_rng(0), job="rl", steps=8), "rl.eval_every"),
])
def test_a_dir_that_holds_no_curve_is_refused_in_one_line(tmp_path, make, message):
    d = tmp_path / "run"
    d.mkdir()
    make(d)
    with pytest.raises(ValueError, match=message):
        lc.curve(d)
