"""Staged SFT: each stage starts from the previous one; external checkpoints plug in; clear errors."""
import json
import os
import subprocess
import sys

import pytest

from chorus.sft.stages import resolve_init, run_stage

STAGE = {"tasks": {"difficulty": "easy", "per_family": 1, "seed": 0, "families": ["counter"]},
         "kinds": ["validated", "repair"], "min_coverage": 80.0, "prioritised": False, "steps": 3,
         "batch_size": 2, "lr": 1e-3, "warmup_steps": 1, "max_tokens": 4096, "max_new_tokens": 16,
         "max_prompt_tokens": 3072, "checkpoint": None}


def test_stages_chain_and_an_external_checkpoint_plugs_in(tmp_path, tiny_xs, sim_cfg):
    model = {"name": "hf", "path": str(tiny_xs)}

    def stage(name: str, init: str | None, **extra) -> dict:
        cfg = {**STAGE, "name": name, "init": init, **extra}
        return run_stage(cfg, resolve_init(cfg, model, tmp_path), "vectors", sim_cfg, tmp_path / "sft" / name,
                         workers=2)

    s0 = stage("stage0", None)
    assert s0["init"] == str(tiny_xs) and (tmp_path / "sft/stage0/hf/config.json").exists()
    s1 = stage("stage1", "stage0")  # by name: the stage's default run dir
    assert s1["init"] == s0["checkpoint"]
    s2 = stage("stage2", str(tmp_path / "sft/stage1/hf"), prioritised=True)  # by path, as the pipeline wires it
    assert s2["init"] == s1["checkpoint"] and s2["examples"] == 6  # steps x batch drawn by priority
    with pytest.raises(ValueError, match="neither a stage"):
        resolve_init({**STAGE, "name": "stage1", "init": str(tmp_path / "nowhere")}, model, tmp_path)
    ext = run_stage({**STAGE, "name": "stage1", "init": "stage0", "checkpoint": str(tiny_xs)}, None, "vectors",
                    sim_cfg, tmp_path / "other/sft/stage1")
    assert ext == {"stage": "stage1", "checkpoint": str(tiny_xs), "external": True}
    assert json.loads((tmp_path / "other/sft/stage1/stage.json").read_text())["external"]


@pytest.mark.parametrize("overrides, message", [
    (["sft_stage=stage2"], "stage stage1 has no checkpoint"),
    (["job=nope"], "unknown job 'nope'"),
    (["sft_stage=stage1", "sft_stage.checkpoint=/no/such/model"], "does not exist"),
    (["job=rl", "sft_stage=stage1"], "stage stage1 has no checkpoint"),
    (["job=rl", "sft_stage.checkpoint=/no/such/model"], "does not exist"),
])
def test_train_cli_errors_name_the_fix(tmp_path, overrides, message):
    p = subprocess.run([sys.executable, "-m", "chorus.train", *overrides, f"runs_dir={tmp_path}",
                        f"hydra.run.dir={tmp_path / 'h'}"], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ))
    assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("overrides, message", [
    (["job=rl", "rl_algo=ppo"], "Could not find 'rl_algo/ppo'"),
    (["sft_stage=stage9"], "Could not find 'sft_stage/stage9'"),
])
def test_unknown_group_options_list_the_choices(tmp_path, overrides, message):
    p = subprocess.run([sys.executable, "-m", "chorus.train", *overrides, f"runs_dir={tmp_path}",
                        f"hydra.run.dir={tmp_path / 'h'}"], capture_output=True, text=True, timeout=300)
    assert p.returncode != 0 and message in p.stderr and "Available options" in p.stderr
    assert "Traceback" not in p.stderr
