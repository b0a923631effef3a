"""Staged SFT: each stage starts from the previous one; external checkpoints plug in; clear errors."""
import json
import os
import subprocess
import sys

import pytest

from chorus.config.schema import SFTStageConf, StageTasksConf
from chorus.core.modes import Difficulty, RepairSource, SFTKind
from chorus.sft.stages import resolve_init, run_stage
from chorus.tracking.progress import Progress
from helpers import context, lines


def stage_conf(name: str, **over) -> SFTStageConf:
    """A 3-step stage on one easy counter design (the rest: SFTStageConf's defaults)."""
    tasks = StageTasksConf(difficulty=Difficulty.easy, per_family=1, seed=0, families=["counter"])
    return SFTStageConf(name=name, tasks=tasks, kinds=[SFTKind.validated, SFTKind.repair], steps=3, batch_size=2,
                        warmup_steps=1, max_new_tokens=16, **over)


def test_stages_chain_and_an_external_checkpoint_plugs_in(tmp_path, tiny_xs, sim_cfg):
    model = {"name": "hf", "path": str(tiny_xs)}

    def stage(name: str, init: str | None, **extra) -> dict:
        cfg, out = stage_conf(name, init=init, **extra), tmp_path / "sft" / name
        return run_stage(cfg, resolve_init(cfg.init, model, tmp_path), context(out, sim_cfg, progress=Progress(out)))

    s0 = stage("stage0", None)
    assert s0["init"] == str(tiny_xs) and (tmp_path / "sft/stage0/hf/config.json").exists()
    s1 = stage("stage1", "stage0", repair_from=RepairSource.own, own_samples=2)  # by name: the default run dir
    assert s1["init"] == s0["checkpoint"]
    # its repairs start from stage 0's own samples: 2 of the stage's one design
    own = [p for p in lines(tmp_path / "sft/stage1/progress.jsonl") if p["phase"] == "own samples"]
    assert own[0]["done"] == 0 and own[-1]["done"] == own[-1]["total"] == 2
    s2 = stage("stage2", str(tmp_path / "sft/stage1/hf"), prioritised=True,  # by path, as the pipeline wires it
               prioritise_samples=3)
    assert s2["init"] == s1["checkpoint"] and s2["examples"] == 6  # steps x batch drawn by priority
    # the prioritised stage's long phases report progress up to their totals
    progress = lines(tmp_path / "sft/stage2/progress.jsonl")
    for phase in ("sft data", "current coverage"):
        counts = [(p["done"], p["total"]) for p in progress if p["phase"] == phase]
        assert counts[0][0] == 0 and counts[-1][0] == counts[-1][1] > 0, phase
    # the starting model's coverage is averaged over 3 samples of the stage's one design
    assert [p["total"] for p in progress if p["phase"] == "current coverage"][-1] == 3
    # with repairs from its own samples as well, the stage reads that coverage from those samples
    out = tmp_path / "other/sft/stage2"
    run_stage(stage_conf("stage2", prioritised=True, prioritise_samples=2, repair_from=RepairSource.own,
                         own_samples=3), str(tmp_path / "sft/stage1/hf"), context(out, sim_cfg, progress=Progress(out)))
    phases = {p["phase"] for p in lines(out / "progress.jsonl")}
    assert "own samples" in phases and "current coverage" not in phases
    with pytest.raises(ValueError, match="own_samples must be >= 1"):
        stage("stage2", str(tmp_path / "sft/stage1/hf"), prioritised=True, prioritise_samples=0)
    with pytest.raises(ValueError, match="neither a stage"):
        resolve_init(str(tmp_path / "nowhere"), model, tmp_path)
    registered = tmp_path / "other/sft/stage1"
    ext = run_stage(stage_conf("stage1", init="stage0", checkpoint=str(tiny_xs)), None,
                    context(registered, sim_cfg, progress=Progress(registered)))
    assert ext == {"stage": "stage1", "checkpoint": str(tiny_xs), "external": True}
    assert json.loads((registered / "stage.json").read_text())["external"]
    assert [p["phase"] for p in lines(registered / "progress.jsonl")] == ["sft checkpoint registered"]


@pytest.mark.slow
def test_a_stage_that_is_not_evaluated_still_ends_with_its_summary(tmp_path, tiny_xs, cache_root):
    """sft_stage.evaluate=false writes no held-out table, but summary.json all the same: the pipeline
    counts a step done by it, and a stage without one was re-trained on every resume."""
    from chorus.workflow.steps import Step

    env = {**os.environ, "CHORUS_CACHE_DIR": str(cache_root), "WANDB_MODE": "offline"}
    cmd = [sys.executable, "-m", "chorus.train", "job=sft", f"runs_dir={tmp_path}", "model=tiny", "model.size=xs",
           "format=vectors", "sft_stage.steps=2", "sft_stage.batch_size=2", "sft_stage.tasks.per_family=1",
           "sft_stage.tasks.families=[counter]", "sft_stage.evaluate=false", "logger=none",
           f"hydra.run.dir={tmp_path / 'h'}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    (run,) = tmp_path.glob("sft/stage0-*")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["evaluated"] is False and summary["checkpoint"] == str(run / "hf") and summary["job"] == "sft"
    assert "training_s" in summary["timing"] and not (run / "per_task.parquet").exists()
    record = json.loads((run / "run.json").read_text())
    assert Step("sft/stage0", "chorus.train", [], run, identity=record["identity"]).done()
    (run / "summary.json").unlink()  # as such a stage ended before it wrote one: its stage.json
    assert Step("sft/stage0", "chorus.train", [], run, identity=record["identity"]).done()
    (run / "stage.json").unlink()
    assert Step("sft/stage0", "chorus.train", [], run, identity=record["identity"]).state() == ("todo", [])


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



def test_the_starting_models_own_samples_are_drawn_prompts_per_call_tasks_a_generate_call(tmp_path, tiny_xs, sim_cfg,
                                                                                      monkeypatch):
    """5 designs, 2 samples each, 2 tasks a generate call: calls of 2, 2 and 1 prompts, n=2 each, and
    every design's samples returned in design order."""
    from chorus.policy.engines import HFEngine
    from chorus.sft.stages import sample_answers
    from chorus.tasks import load_tasks

    calls, generate = [], HFEngine.generate

    def recorded(self, prompts, n=1, **kw):
        calls.append((len(prompts), n))
        return generate(self, prompts, n=n, **kw)

    monkeypatch.setattr(HFEngine, "generate", recorded)
    tasks = load_tasks("generated", split="train", per_family=12, families=["counter"])[:5]
    assert len(tasks) == 5
    out = tmp_path / "sft"
    pairs = sample_answers(str(tiny_xs), tasks, stage_conf("stage1", own_samples=2), context(out, sim_cfg),
                           prompts_per_call=2)
    assert calls == [(2, 2), (2, 2), (1, 2)]
    assert [t.id for t, _ in pairs] == [t.id for t in tasks for _ in range(2)]
