"""The pipeline: its plan (composed before anything runs), the step runner, and the smoke run end to end."""
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from chorus.config_schema import CONF_DIR, register_configs
from chorus.pipeline import plan
from chorus.workflow.runner import StepFailed, run_steps
from chorus.workflow.steps import Step


def pipeline_cfg(*overrides) -> dict:
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        c = OmegaConf.to_container(compose(config_name="pipeline", overrides=list(overrides)), resolve=True)
        return c, plan(c)


def test_the_plan_chains_stages_experts_and_consolidation(tmp_path):
    c, steps = pipeline_cfg(f"runs_dir={tmp_path}", "seed=3")
    by = {s.name: s for s in steps}
    assert list(by) == ["sft/stage0", "sft/stage1", "sft/stage2", "rl/stage0", "rl/stage1", "rl/stage2",
                        "consolidation/soup", "consolidation/ties", "consolidation/della", "consolidation/opd"]
    assert by["sft/stage1"].after == ["sft/stage0"] and by["rl/stage2"].after == ["sft/stage2"]
    assert by["consolidation/opd"].after == ["rl/stage0", "rl/stage1", "rl/stage2"]
    assert by["rl/stage1"].run_dir == tmp_path / "rl/dapo/stage1"
    assert by["consolidation/ties"].run_dir == tmp_path / "consolidation/ties/three_experts"
    assert "seed=3" in by["sft/stage0"].overrides and "model.size=s" in by["rl/stage0"].overrides
    assert by["consolidation/opd"].command().startswith("python -m chorus.train runs_dir=")


def test_real_checkpoints_replace_stages_and_extra_reaches_every_job(tmp_path):
    _, steps = pipeline_cfg(f"runs_dir={tmp_path}", "checkpoints.stage0=/ckpt/s0", "checkpoints.stage2=org/model",
                            'extra=["trainer=gpu","model.dtype=bfloat16"]')
    by = {s.name: s for s in steps}
    assert "sft_stage.checkpoint=/ckpt/s0" in by["sft/stage0"].overrides
    assert "sft_stage.checkpoint=org/model" in by["rl/stage2"].overrides
    assert by["sft/stage2"].after == [] and by["sft/stage1"].after == ["sft/stage0"]
    assert "teacher_pool.base=/ckpt/s0" in by["consolidation/della"].overrides
    assert all("trainer=gpu" in s.overrides and "model.dtype=bfloat16" in s.overrides for s in steps)


def test_a_bad_plan_fails_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match="step sft/stage0: Could not override 'rl.stepz'"):
        pipeline_cfg(f"runs_dir={tmp_path}", 'extra=["rl.stepz=3"]')
    with pytest.raises(ValueError, match=r"unknown stage\(s\) \['stage7'\] in pipeline.stages"):
        pipeline_cfg(f"runs_dir={tmp_path}", "+pipeline.stages.stage7=[sft_stage.lr]")
    p = subprocess.run([sys.executable, "-m", "chorus.pipeline", f"runs_dir={tmp_path}", "checkpoints.stage7=/x"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "Key 'stage7' not in 'StageCheckpointsConf'" in p.stderr
    assert not (tmp_path / "sft").exists()


def test_runner_skips_done_steps_and_stops_at_a_failure(tmp_path, cache_root):
    work = tmp_path / "work"
    ok = Step("eval", "chorus.evaluate", ["tasks=bundled", "tasks.limit=1", "policy=reference", "logger=none"],
              work / "hydra" / "eval")
    bad = Step("train", "chorus.train", ["job=sft", "sft_stage=stage9"], tmp_path / "never")
    after_bad = Step("later", "chorus.train", ["job=sft"], tmp_path / "later", after=["train"])
    env = {"CHORUS_CACHE_DIR": str(cache_root)}
    with pytest.raises(StepFailed) as err:
        run_steps([ok, bad, after_bad], work, jobs=2, env=env)
    assert "step train failed (exit" in str(err.value) and "Could not find 'sft_stage/stage9'" in str(err.value)
    assert f"log: {work / 'logs/train.log'}" in str(err.value)
    assert ok.done() and not (tmp_path / "later").exists()
    records = run_steps([ok], work, env=env)
    assert records[0]["status"] == "skipped (done)"


def test_smoke_pipeline_end_to_end_then_resume(tmp_path, cache_root):
    """pipeline=smoke: every step for real on the xs model, REPORT.md, then a re-run that skips them all."""
    env = {**__import__("os").environ, "CHORUS_CACHE_DIR": str(cache_root)}
    cmd = [sys.executable, "-m", "chorus.pipeline", "pipeline=smoke", f"runs_dir={tmp_path}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    report = (tmp_path / "REPORT.md").read_text()
    for row in ("sft/stage0", "dapo/stage0", "dapo/stage1", "dapo/stage2", "oracle union (experts)",
                "soup/three_experts", "ties/three_experts", "della/three_experts", "opd/three_experts"):
        assert f"| {row} " in report, row
    assert "## OPD routing" in report and "## Steps" in report and "python -m chorus.train" in report
    assert all((tmp_path / f).stat().st_size > 100 for f in ("complementarity.png", "chorus_table.png"))
    steps = json.loads((tmp_path / "pipeline/steps.json").read_text())
    assert [s["status"] for s in steps] == ["done"] * 10
    for s in steps:
        run = Path(s["run_dir"])
        summary = json.loads((run / "summary.json").read_text())
        assert summary["job"] in ("sft", "rl", "consolidation") and summary["model"] == "tiny-xs"
        assert len(pd.read_parquet(run / "per_task.parquet")) == summary["n_samples"] > 0
        assert (run / ".hydra/config.yaml").exists() and list((run / "wandb").glob("offline-run-*"))
    assert (tmp_path / "consolidation/opd/three_experts/decisions.jsonl").exists()
    stamps = {s["run_dir"]: (Path(s["run_dir"]) / "summary.json").stat().st_mtime for s in steps}

    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "0 steps run, 10 skipped (done)" in again.stdout
    assert {d: (Path(d) / "summary.json").stat().st_mtime for d in stamps} == stamps
