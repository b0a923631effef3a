"""The pipeline: its plan (composed before anything runs), the step runner, and the smoke run end to end."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from notebook_runner import ANALYSIS, errors, execute, outputs
from omegaconf import OmegaConf

from chorus.analysis.study_manifest import read_manifest
from chorus.config.job_settings import override_key
from chorus.config.schema import CONF_DIR, register_configs
from chorus.pipeline import plan
from chorus.workflow.plan import in_report, superseded_dropped
from chorus.workflow.study_record import write_study
from chorus.tracking.record import machine_kind
from chorus.workflow.runner import StepFailed, run_steps
from chorus.workflow.steps import Step


def pipeline_cfg(*overrides) -> dict:
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        c = OmegaConf.to_container(compose(config_name="pipeline", overrides=list(overrides)), resolve=True)
        return c, plan(c)


def test_the_plan_chains_stages_experts_and_consolidation(tmp_path):
    c, steps = pipeline_cfg(f"runs_dir={tmp_path}", "pipeline=tiny", "seed=3")
    by = {s.name: s for s in steps}
    assert list(by) == ["sft/stage0", "sft/stage1", "sft/stage2", "rl/stage0", "rl/stage1", "rl/stage2",
                        "tables/stage0", "tables/stage1", "tables/stage2",
                        "consolidation/soup", "consolidation/ties", "consolidation/della", "consolidation/opd",
                        "baseline/random"]
    assert by["sft/stage1"].after == ["sft/stage0"] and by["rl/stage2"].after == ["sft/stage2"]
    # OPD starts from the soup step's checkpoint and gates on each expert's table
    assert by["consolidation/opd"].after == ["rl/stage0", "rl/stage1", "rl/stage2", "consolidation/soup",
                                             "tables/stage0", "tables/stage1", "tables/stage2"]
    opd = by["consolidation/opd"].overrides
    assert f"consolidation.student={by['consolidation/soup'].run_dir / 'hf'}" in opd
    for i in range(3):
        table = by[f"tables/stage{i}"]
        assert {f"teacher_pool.teachers.{i}.source=table", f"teacher_pool.teachers.{i}.rewards={table.run_dir}",
                "teacher_pool.missing=online"} <= set(opd)
        # the expert on its own training tasks, 8 samples each, at the training temperature
        assert table.module == "chorus.evaluate" and table.after == [f"rl/stage{i}"]
        assert {f"model.path={by[f'rl/stage{i}'].run_dir / 'hf'}", "tasks.split=train", "n_samples=8",
                "policy.temperature=0.5", "tasks.per_family=24"} <= set(table.overrides), table.overrides
    # each dir is its group path plus the hash of the preset's settings, and the steps are wired by them
    assert by["rl/stage1"].run_dir.parent == tmp_path / "rl/dapo" and by["rl/stage1"].run_dir.name.startswith("stage1-")
    assert f"sft_stage.init={by['sft/stage0'].run_dir / 'hf'}" in by["sft/stage1"].overrides
    assert f"sft_stage.checkpoint={by['sft/stage1'].run_dir / 'hf'}" in by["rl/stage1"].overrides
    assert f"teacher_pool.teachers.1.checkpoint={by['rl/stage1'].run_dir / 'hf'}" in by["consolidation/ties"].overrides
    assert f"teacher_pool.base={by['sft/stage0'].run_dir / 'hf'}" in by["consolidation/ties"].overrides
    assert by["consolidation/ties"].run_dir.parent == tmp_path / "consolidation/ties"
    assert len({s.run_dir for s in steps}) == 14
    # uniform random stimulus on exactly the experts' held-out tasks, samples, format and pass rule
    random = by["baseline/random"]
    assert random.module == "chorus.evaluate" and random.after == [] and random.hydra_dir(tmp_path) == random.run_dir
    assert {"policy=random", "tasks=generated", "tasks.split=test", "tasks.seed=100", "tasks.per_family=40",
            "format=vectors", "n_samples=4"} <= set(random.overrides), random.overrides
    assert not any(o.startswith("pass_coverage") for o in random.overrides)  # the tasks' own targets
    # the preset's settings reach only the jobs that read them
    assert "seed=3" in by["sft/stage0"].overrides and "model.size=s" in by["rl/stage0"].overrides
    assert "sft_stage.max_prompt_tokens=512" in by["sft/stage0"].overrides
    assert not any(o.startswith("sft_stage.max_prompt_tokens") for o in by["rl/stage0"].overrides)
    assert "rl.max_new_tokens=192" in by["sft/stage0"].overrides  # the stage's held-out evaluation reads it
    assert by["consolidation/opd"].command().startswith("python -m chorus.train runs_dir=")


def test_real_checkpoints_replace_stages_and_extra_reaches_the_jobs_that_read_it(tmp_path):
    _, steps = pipeline_cfg(f"runs_dir={tmp_path}", "pipeline=tiny", "checkpoints.stage0=/ckpt/s0",
                            "checkpoints.stage2=org/model",
                            'extra=["trainer=gpu","model.dtype=bfloat16"]')
    by = {s.name: s for s in steps}
    assert "sft_stage.checkpoint=/ckpt/s0" in by["sft/stage0"].overrides
    assert "sft_stage.checkpoint=org/model" in by["rl/stage2"].overrides
    assert "sft_stage.init=/ckpt/s0" in by["sft/stage1"].overrides
    assert by["sft/stage2"].after == [] and by["sft/stage1"].after == ["sft/stage0"]
    assert "teacher_pool.base=/ckpt/s0" in by["consolidation/della"].overrides
    on_trainer = {s.name for s in steps if "trainer=gpu" in s.overrides}
    on_policy = {"rl/stage0", "rl/stage1", "rl/stage2", "consolidation/opd"}
    # SFT stages train (or evaluate their registered checkpoint) on the trainer, and merges evaluate there
    merges = {s.name for s in steps if s.name.startswith("consolidation/") and s.name != "consolidation/opd"}
    assert merges and on_trainer == on_policy | merges | {"sft/stage0", "sft/stage1", "sft/stage2"}
    # model.dtype reaches every job that evaluates: the on-policy ones load their untrained models in it,
    # and SFT stages and merges (trained and merged in float32) their held-out evaluation on a GPU
    assert {s.name for s in steps if "model.dtype=bfloat16" in s.overrides} == on_trainer


def step_cfg(step) -> dict:
    """A planned step's config as its job composes it."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return OmegaConf.to_container(compose(config_name="train", overrides=step.overrides), resolve=True)


def test_extra_wins_over_every_preset_list_and_the_wiring_wins_over_extra(tmp_path):
    """The tiny preset's rl and opd lists set rl.steps=8, group 4, lr 3e-5 / 2e-5; extra's values must
    be what every planned expert and OPD step composes (before, the preset's won)."""
    _, steps = pipeline_cfg(f"runs_dir={tmp_path}", "pipeline=tiny", "pipeline.controls.rl_seeds=2",
                            'extra=["rl.steps=200","rl.group_size=8","rl.lr=1e-6","sft_stage.steps=7","seed=5"]')
    by = {s.name: s for s in steps}
    trained = [n for n in by if n.startswith("rl/") or n == "consolidation/opd"]
    assert len(trained) == 7  # 2 experts per stage (rl_seeds=2), OPD
    for name in trained:
        rl = step_cfg(by[name])["rl"]
        assert (rl["steps"], rl["group_size"], rl["lr"]) == (200, 8, 1e-6), name
    assert step_cfg(by["sft/stage1"])["sft_stage"]["steps"] == 7  # over the preset's stages list too
    # the plan's wiring is not a setting: an expert keeps its own RL seed (pipeline seed 0, stage 1's
    # replicate j: 1000 (1 + 3 j)), whatever extra says; the SFT stages take extra's
    assert [step_cfg(by[n])["seed"] for n in ("rl/stage1", "rl/stage1-rl1", "sft/stage1")] == [1000, 4000, 5]


def test_the_qwen3_4b_recipe_plans_dapo_settings(tmp_path):
    _, steps = pipeline_cfg(f"runs_dir={tmp_path}", "pipeline=qwen3_4b", "checkpoints.stage0=/ckpt/s0",
                            "checkpoints.stage1=/ckpt/s1", "checkpoints.stage2=/ckpt/s2")
    by = {s.name: s for s in steps}
    for name in ("rl/stage0", "rl/stage2", "consolidation/opd"):
        c = step_cfg(by[name])
        assert (c["rl"]["steps"], c["rl"]["group_size"], c["rl"]["lr"], c["rl"]["warmup_steps"]) == (200, 8, 1e-6, 20)
        assert (c["rl"]["engine"], c["trainer"]["name"], c["model"]["dtype"]) == ("vllm", "gpu", "bfloat16")
    assert step_cfg(by["rl/stage1"])["sft_stage"]["checkpoint"] == "/ckpt/s1"


def test_a_changed_setting_moves_exactly_the_steps_it_reaches(tmp_path):
    _, before = pipeline_cfg(f"runs_dir={tmp_path}", "pipeline=smoke")
    _, grpo = pipeline_cfg(f"runs_dir={tmp_path}", "pipeline=smoke", 'extra=["rl_algo=grpo"]')
    _, margin = pipeline_cfg(f"runs_dir={tmp_path}", "pipeline=smoke", 'pipeline.opd=["consolidation.margin=0.1"]')
    moved = lambda after: {a.name for a, b in zip(before, after) if a.run_dir != b.run_dir}  # noqa: E731
    # the experts change algorithm, so do the merges and OPD built from them; the SFT stages do not
    assert moved(grpo) == {"rl/stage0", "rl/stage1", "rl/stage2", "consolidation/soup", "consolidation/ties",
                           "consolidation/della", "consolidation/opd", "tables/stage0", "tables/stage1",
                           "tables/stage2"}
    assert all(s.run_dir.parent == tmp_path / "rl/grpo" for s in grpo if s.name.startswith("rl/"))
    assert moved(margin) == {"consolidation/opd"}


def test_a_setting_no_step_reads_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"no step of the pipeline reads consolidation.beta=0.3"):
        pipeline_cfg(f"runs_dir={tmp_path}", 'extra=["consolidation.beta=0.3"]')
    # a consolidation setting in an RL step's own list: consolidation=none's schema has no such key
    with pytest.raises(ValueError, match=r"step rl/stage0: Could not override 'consolidation.margin'"):
        pipeline_cfg(f"runs_dir={tmp_path}", 'pipeline.rl=["consolidation.margin=0.1"]')


def test_a_dir_holding_other_settings_stops_the_run_before_anything_starts(tmp_path):
    from chorus.tracking.identity import write_record

    run = tmp_path / "runs/rl/dapo/stage0"
    write_record(run, {"identity": {"job": "rl", "rl.steps": 30}})
    (run / "summary.json").write_text("{}")
    same = Step("rl/stage0", "chorus.train", ["job=rl"], run, identity={"job": "rl", "rl.steps": 30})
    other = Step("rl/stage0", "chorus.train", ["job=rl"], run, identity={"job": "rl", "rl.steps": 4})
    assert same.state() == ("done", []) and other.state() == ("stale", ["rl.steps: 30 -> 4"])
    with pytest.raises(StepFailed, match=r"step rl/stage0: .* holds results made with other settings \(rl.steps: 30 -> 4\)"):
        run_steps([other], tmp_path / "work")
    assert not (tmp_path / "work/logs").exists()
    (run / "run.json").unlink()
    assert same.state()[0] == "stale"  # results without a record are never taken as done


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


@pytest.mark.slow
def test_every_training_steps_memory_is_planned_before_any_step_runs(tmp_path, cache_root):
    """A device too small for smoke's first RL step (its auto micro-batch cannot fit one row) is refused
    in one line naming that step, before the SFT stages ahead of it run."""
    env = {**__import__("os").environ, "CHORUS_CACHE_DIR": str(cache_root)}
    p = subprocess.run([sys.executable, "-m", "chorus.pipeline", "pipeline=smoke", f"runs_dir={tmp_path}",
                        'extra=["plan_device_gib=0.001"]'], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr[-2000:]
    assert p.stderr.startswith("chorus.pipeline: error: step rl/stage0: rl.micro_batch=null (auto): not even one row")
    assert not list(tmp_path.glob("sft/*")) and not list(tmp_path.glob("rl/*"))  # nothing ran


def test_smoke_pipeline_end_to_end_then_resume(tmp_path, cache_root):
    """pipeline=smoke: every step for real on the xs model, REPORT.md, the notebooks over its folder, then a
    re-run that skips them all."""
    env = {**__import__("os").environ, "CHORUS_CACHE_DIR": str(cache_root)}
    cmd = [sys.executable, "-m", "chorus.pipeline", "pipeline=smoke", f"runs_dir={tmp_path}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    report = (tmp_path / "REPORT.md").read_text()
    for row in ("sft/stage0", "dapo/stage0", "dapo/stage1", "dapo/stage2", "oracle union (experts)",
                "soup/three_experts", "ties/three_experts", "della/three_experts", "opd/three_experts",
                "random stimulus"):
        assert f"| {row} " in report, row
    assert "## OPD routing" in report and "## Steps" in report and "python -m chorus.train" in report
    assert all((tmp_path / f).stat().st_size > 100 for f in ("complementarity.png", "chorus_table.png"))
    steps = json.loads((tmp_path / "pipeline/steps.json").read_text())
    assert [s["status"] for s in steps] == ["done"] * 14  # 3 SFT, 3 experts, their 3 gate tables, 4 consolidations, random
    header = [c.strip() for c in next(ln for ln in report.splitlines() if ln.startswith("| step ")).split("|")]
    assert header[1:8] == ["step", "status", "minutes", "generation", "simulation wait", "training", "other"]
    assert "| base (tiny, built once, cached) |" in report  # smoke's xs base: no pretraining, cached or built
    busy = float(re.search(r"Busy wall clock ([0-9.]+) min", report).group(1))
    assert max(s["seconds"] for s in steps) / 60 - 0.1 <= busy <= sum(s["seconds"] for s in steps) / 60 + 0.1
    for s in steps:  # every job records where its time went
        timing = json.loads((Path(s["run_dir"]) / "summary.json").read_text())["timing"]
        assert timing["simulation_wait_s"] > 0, s["name"]
        assert (timing.get("generation_s", 0) > 0) == (s["name"] != "baseline/random"), s["name"]
    random = pd.read_parquet(next(tmp_path.glob("baseline/random-*/per_task.parquet")))
    expert = pd.read_parquet(next(tmp_path.glob("rl/dapo/stage0*/per_task.parquet")))
    assert sorted(random["task_id"]) == sorted(expert["task_id"])  # the same held-out tasks and samples
    for s in [s for s in steps if s["name"].startswith(("sft/", "rl/", "consolidation/"))]:
        run = Path(s["run_dir"])
        summary = json.loads((run / "summary.json").read_text())
        assert summary["job"] in ("sft", "rl", "consolidation") and summary["model"] == "tiny-xs"
        assert summary["machine"] == machine_kind()
        assert len(pd.read_parquet(run / "per_task.parquet")) == summary["n_samples"] > 0
        assert (run / ".hydra/config.yaml").exists() and list((run / "wandb").glob("offline-run-*"))
        assert json.loads((run / "run.json").read_text())["identity"]["job"] == summary["job"]
        assert (run / "progress.jsonl").exists()
    assert len(list(tmp_path.glob("consolidation/opd/three_experts-*/decisions.jsonl"))) == 1

    # the notebooks over this folder, as docs/howto/notebooks.md runs them from the repository root: the
    # gate tables (tables/stage*, each expert on its training tasks) are set apart, not aligned with the
    # held-out runs (which left no task); one sample per task is no study, which study.ipynb says in one line
    for name in ("complementarity.ipynb", "consolidation.ipynb"):
        shown = outputs(execute(ANALYSIS / name, {"CHORUS_RUNS": str(tmp_path)}))
        assert shown.count("set apart stage") == 3 and "are on the train split, the experts' on test" in shown, name
        assert "dapo/stage2" in shown and "opd/three_experts" in shown, name
    study_nb = execute(ANALYSIS / "study.ipynb", {"CHORUS_STUDY": str(tmp_path)}, expect_error=True)
    assert errors(study_nb) == [f"StudyError: {tmp_path}: the noise-corrected pattern needs >= 2 samples per task "
                                "and expert (fewest here: 1)"]
    stamps = {s["run_dir"]: (Path(s["run_dir"]) / "summary.json").stat().st_mtime for s in steps}

    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "0 steps run, 14 skipped (done)" in again.stdout
    assert {d: (Path(d) / "summary.json").stat().st_mtime for d in stamps} == stamps
    resumed = json.loads((tmp_path / "pipeline/steps.json").read_text())
    assert [s["seconds"] for s in resumed] == [s["seconds"] for s in steps]  # the times they took when they ran
    assert [(s["started"], s["ended"]) for s in resumed] == [(s["started"], s["ended"]) for s in steps]
    assert all(s["ended"] - s["started"] == pytest.approx(s["seconds"], abs=0.2) for s in steps)

    # a changed OPD setting re-runs OPD alone, into its own dir; the report shows this plan's OPD only
    changed = subprocess.run(cmd + ['pipeline.opd=["rl.steps=1","rl.prompts_per_step=1","rl.group_size=2",'
                                    '"teacher_pool.online_samples=1","consolidation.margin=0.5"]'],
                             capture_output=True, text=True, timeout=600, env=env)
    assert changed.returncode == 0, changed.stderr[-3000:]
    assert "1 steps run, 13 skipped (done)" in changed.stdout
    first_opd = next(Path(s["run_dir"]) for s in steps if s["name"] == "consolidation/opd")
    (new_opd,) = set(tmp_path.glob("consolidation/opd/three_experts-*")) - {first_opd}
    report = (tmp_path / "REPORT.md").read_text()
    table = report.split("## The CHORUS table")[1].split("\n## ")[0]
    assert len(re.findall(r"^\| opd/three_experts ", table, flags=re.M)) == 1  # not two OPD runs side by side
    assert str(new_opd) in report and str(first_opd) not in report

    # a study beside the same plan: a second RL seed per stage (seeds 1000 (i + 3 j)) leaves every first
    # expert's seed as it was, so the SFT chain, the first experts, the consolidations and the baseline
    # are reused and only the second replicates and the families control run. REPORT.md keeps to one expert per stage; the Controls section lists all with their seeds
    controls = ["pipeline.controls.rl_seeds=2", "pipeline.controls.families=[[counter],[alu]]",
                'pipeline.controls.opd=["teacher_pool=two_experts","consolidation.margin=0.5"]']
    ctl = subprocess.run(cmd + controls, capture_output=True, text=True, timeout=900, env=env)
    assert ctl.returncode == 0, ctl.stderr[-3000:]
    # 3 second replicates; per family group an SFT fork of stage 0, an expert and its gate table; their soup and OPD
    assert "11 steps run, 14 skipped (done)" in ctl.stdout
    planned = {s["name"]: Path(s["run_dir"]) for s in json.loads((tmp_path / "pipeline/steps.json").read_text())}
    m = read_manifest(tmp_path)  # named relative to the runs_dir, so the folder can be moved (study_keep=...)
    assert m.design == 2 and m.rl_seeds_distinct()
    assert m.experts == {s: [planned[f"rl/{s}"], planned[f"rl/{s}-rl1"]] for s in ("stage0", "stage1", "stage2")}
    assert set(m.consolidations) == {"soup", "ties", "della", "opd"} and len(m.families) == 2
    assert "opd/two_experts-families-" in str(m.families_opd)
    assert json.loads((tmp_path / "controls.json").read_text())["experts"]["stage0"][0].startswith("rl/dapo/stage0")
    report = (tmp_path / "REPORT.md").read_text()
    table, text = report.split("## The CHORUS table")[1].split("\n## Controls (pipeline.controls)\n")
    for i, stage in enumerate(("stage0", "stage1", "stage2")):
        for j in (0, 1):
            assert f"| {stage} | {1000 * (i + 3 * j)} | " in text, (stage, j)
    assert "python -m chorus.analyze study=" in text and "refuses this seed" not in text
    results, times = table.split("\n## Steps\n")
    assert "rl1" not in results and "fam0" not in results  # the CHORUS table: one expert per stage
    assert "| rl/stage0-rl1 " in times and "| control/families/rl0 " in times  # every step's minutes

    # the GPU's training settings on the CPU: SFT, RL and OPD steps as their commands say, re-run under
    # bf16-mixed with the fused AdamW (the first clip used to raise), each into a dir of its own
    for s in [s for s in steps if s["name"] in ("sft/stage0", "rl/stage0", "consolidation/opd")]:
        planned = Path(s["run_dir"])
        before = set(planned.parent.iterdir())
        gpu = subprocess.run(["bash", "-c", s["command"] + " trainer.precision=bf16-mixed trainer.fused_optimizer=true "
                              f"hydra.run.dir={tmp_path}/gpu_settings/{s['name']}"],
                             capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
        assert gpu.returncode == 0, gpu.stderr[-3000:]
        (run,) = set(planned.parent.iterdir()) - before
        assert json.loads((run / "summary.json").read_text())["n_samples"] > 0, s["name"]
        assert json.loads((run / "run.json").read_text())["overrides"][-2:] == ["trainer.precision=bf16-mixed",
                                                                               "trainer.fused_optimizer=true"]


def test_the_default_pipeline_is_the_staged_world(tmp_path):
    c, steps = pipeline_cfg(f"runs_dir={tmp_path}")
    assert c["pipeline"]["name"] == "staged" and c["runs_dir"] == f"{tmp_path}"
    by = {s.name: s for s in steps}
    assert {"sft_stage.tasks.difficulty=mixed", "sft_stage.strategies=true", "model.pretrain_steps=600"} <= set(
        by["sft/stage0"].overrides)
    assert "sft_stage.repair_from=own" in by["sft/stage1"].overrides
    assert "sft_stage.prioritise_samples=4" in by["sft/stage2"].overrides
    # the held-out split: 240 designs per family, the classes no expert learned in the validation pilot pruned
    assert {"tasks.difficulty=mixed", "tasks.per_family=240", "n_samples=16"} <= set(by["baseline/random"].overrides)
    assert any(o.startswith("tasks.prune=[alu/easy/exact,") for o in by["baseline/random"].overrides)
    assert "sft_stage.skills=[exact,climb]" in by["sft/stage0"].overrides  # each stage its own skills
    assert "sft_stage.repair_skills=[exact,sweep]" in by["sft/stage1"].overrides
    assert "sft_stage.skills=[climb]" in by["sft/stage2"].overrides
    # one expert per stage (rl_seeds 1), each with its own RL seed: v1's shared seed confounded stage with it
    assert [n for n in by if n.startswith("rl/")] == ["rl/stage0", "rl/stage1", "rl/stage2"]
    assert [step_cfg(by[f"rl/{s}"])["seed"] for s in ("stage0", "stage1", "stage2")] == [0, 1000, 2000]
    assert not any(n.startswith("control/") for n in by)
    # the preset's prompts a generate call reach every step that samples: the stages drawing their
    # starting model's own samples, the experts, the merges' held-out evaluations; not stage 0 (no draws)
    batch = "rl.prompts_per_generate=32"
    assert [n for n, s in by.items() if batch in s.overrides] == [
        "sft/stage1", "sft/stage2", "rl/stage0", "rl/stage1", "rl/stage2", "consolidation/soup",
        "consolidation/ties", "consolidation/della", "consolidation/opd"]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """pipeline=study's plan at seed 2 with its opt-in agentic secondary (planned once: it composes
    every step twice)."""
    runs = tmp_path_factory.mktemp("study")
    c, steps = pipeline_cfg(f"runs_dir={runs}", "pipeline=study", "seed=2", "pipeline.controls.agentic_rounds=1")
    return runs, c, {s.name: s for s in steps}


def test_the_study_crosses_every_stage_with_three_rl_seeds(study):
    runs, c, by = study
    stages = ("stage0", "stage1", "stage2")
    assert c["pipeline"]["name"] == "study" and c["pipeline"]["controls"]["rl_seeds"] == 3
    experts = [n for n in by if n.startswith("rl/")]
    assert experts == [f"rl/{s}{t}" for s in stages for t in ("", "-rl1", "-rl2")]
    composed = {n: step_cfg(by[n]) for n in [*experts, "sft/stage0", "sft/stage1", "sft/stage2"]}
    # nine experts, nine RL seeds: 2 + 1000 (i + 3 j), so stage is never confounded with RL seed
    assert [composed[n]["seed"] for n in experts] == [2 + 1000 * (i + 3 * j) for i in range(3) for j in range(3)]
    assert [composed[f"sft/{s}"]["seed"] for s in stages] == [2, 2, 2]  # one SFT chain at the pipeline's seed
    for n in experts:  # every replicate starts from its stage's SFT checkpoint, after that step
        stage = n.split("/")[1][:6]
        assert composed[n]["sft_stage"]["checkpoint"] == str(by[f"sft/{stage}"].run_dir / "hf"), n
        assert by[n].after == [f"sft/{stage}"] and composed[n]["sft_stage"]["name"] == stage
    assert [composed[n]["run_tag"] for n in experts[:3]] == ["", "rl1", "rl2"]
    assert len({by[n].run_dir for n in experts}) == 9
    # the consolidations and the report's table keep to each stage's first expert
    for method in ("soup", "ties", "della", "opd"):
        step = by[f"consolidation/{method}"]
        assert step.after[:3] == ["rl/stage0", "rl/stage1", "rl/stage2"], method
        for i, s in enumerate(stages):
            assert f"teacher_pool.teachers.{i}.checkpoint={by[f'rl/{s}'].run_dir / 'hf'}" in step.overrides
    assert [n for n in by if in_report(n) and n.startswith("rl/")] == ["rl/stage0", "rl/stage1", "rl/stage2"]
    assert not any(n.startswith("control/same") for n in by)


def test_the_study_plans_the_families_control_from_stage0s_steps(study):
    runs, c, by = study
    groups = [["counter", "shift_lfsr"], ["fsm", "mux_cmp"], ["alu"]]
    assert c["pipeline"]["controls"]["families"] == groups
    # every SFT job fine-tunes the one pretrained base (a setting the SFT jobs once dropped)
    assert all("model.pretrain_steps=600" in by[n].overrides for n in ("sft/stage0", "control/families/sft1"))
    for i, group in enumerate(groups):
        sft, rl = by[f"control/families/sft{i}"], by[f"control/families/rl{i}"]
        assert f"sft_stage.tasks.families=[{','.join(group)}]" in sft.overrides and sft.after == ["sft/stage0"]
        # forked from stage 0's checkpoint (a shared lineage: their soup is a competent student), as stage 1 is
        assert f"sft_stage.init={by['sft/stage0'].run_dir / 'hf'}" in sft.overrides
        assert {"sft_stage.steps=100", "sft_stage.lr=3e-4"} <= set(sft.overrides)
        # stage 0's settings, each once, those the fork sets again with the fork's value only
        keys = [override_key(o) for o in sft.overrides]
        assert {override_key(o) for o in by["sft/stage0"].overrides} < set(keys) and len(keys) == len(set(keys))
        assert "sft_stage.steps=150" not in sft.overrides and "sft_stage.steps=150" in by["sft/stage0"].overrides
        # every skill of its families (stage 0 keeps to exact answers and climbs): complementary by construction
        assert sft.overrides[-2:] == ["sft_stage.skills=null", f"run_tag=fam{i}"]
        assert f"sft_stage.checkpoint={sft.run_dir / 'hf'}" in rl.overrides and rl.after == [sft.name]
        assert f"teacher_pool.teachers.{i}.checkpoint={rl.run_dir / 'hf'}" in by["control/families/opd"].overrides
        assert f"teacher_pool.teachers.{i}.name=fam{i}" in by["control/families/opd"].overrides
    # OPD's student: the family experts' common ancestor, stage 0's SFT checkpoint (chosen on validation)
    opd = by["control/families/opd"]
    assert f"consolidation.student={by['sft/stage0'].run_dir / 'hf'}" in opd.overrides
    for name in ("control/families/opd", "control/families/opd-random", "consolidation/opd"):  # once, as it runs
        assert sum(o.startswith("consolidation.student=") for o in by[name].overrides) == 1
    assert opd.run_dir != by["consolidation/opd"].run_dir
    # OPD's fourth design (docs/results.md) on the positive control and its routing controls, which
    # differ from it in the routing only; the staged OPD keeps the first design. Its gate's reference,
    # what DAPO from the student reaches, is the stage-0 expert's table
    fourth = {"consolidation.unrouted=rl", "consolidation.teacher_samples=4", "consolidation.routed=both",
              f"consolidation.gate_reference={by['tables/stage0'].run_dir}"}
    for name in ("control/families/opd", "control/families/opd-random", "control/families/opd-no_gate"):
        assert fourth <= set(by[name].overrides), name
    assert not fourth & set(by["consolidation/opd"].overrides)
    assert opd.after == ["control/families/rl0", "control/families/rl1", "control/families/rl2", "sft/stage0",
                         "tables/stage0", "tables/families/fam0", "tables/families/fam1", "tables/families/fam2"]


def test_a_steps_command_line_drops_the_preset_settings_set_again_later():
    """Hydra keeps an override's last value, so the earlier ones only clutter the command line."""
    own = ["consolidation.student=soup", "rl.lr=3e-5", "+rl.x=1", "consolidation.student=stage0", "rl.x=2"]
    assert superseded_dropped(own, ["consolidation.student=/runs/sft/hf"]) == ["rl.lr=3e-5", "rl.x=2"]
    assert superseded_dropped(own, []) == ["rl.lr=3e-5", "consolidation.student=stage0", "rl.x=2"]


def test_opds_controls_each_change_one_thing(study):
    """own_teacher: DAPO from OPD's very student on OPD's tasks and schedule, no refills (as many samples
    drawn); random and no_gate: OPD's run with consolidation.routing changed, nothing else."""
    runs, c, by = study
    for opd_name, ctl in (("control/families/opd", ["own_teacher", "random", "no_gate"]),
                          ("consolidation/opd", ["own_teacher"])):
        opd = by[opd_name]
        prefix = "control/families/opd" if opd_name.startswith("control/") else "control/opd"
        assert [n for n in by if n.startswith(prefix + "-")] == [f"{prefix}-{k}" for k in ctl]
        cfg = step_cfg(opd)
        own = step_cfg(by[f"{prefix}-own_teacher"])
        assert own["job"] == "rl" and own["sft_stage"]["checkpoint"] == cfg["consolidation"]["student"]
        assert own["rl_algo"]["name"] == "dapo" and own["rl_algo"]["max_refills"] == 0
        assert own["seed"] == cfg["seed"] and own["rl"] == cfg["rl"]  # same tasks, order, schedule, selection
        for kind in ctl[1:]:
            other = step_cfg(by[f"{prefix}-{kind}"])
            assert other["consolidation"] == {**cfg["consolidation"], "routing": kind}
            assert other["teacher_pool"] == cfg["teacher_pool"] and other["rl"] == cfg["rl"]
            assert by[f"{prefix}-{kind}"].after == opd.after


def test_the_study_evaluates_each_stages_first_expert_again_with_one_feedback_turn(study):
    """The secondary protocol: chorus.evaluate with protocol=agentic (1 round, a sample stopping once it
    passes: the study reads Pass@1) on each stage's first expert, after it, on the experts' held-out
    tasks with their sampling; not in REPORT.md's table."""
    from chorus.workflow.plan import in_report

    runs, c, by = study
    assert c["pipeline"]["controls"]["agentic_rounds"] == 1
    baseline = by["baseline/random"].overrides
    for stage in ("stage0", "stage1", "stage2"):
        step = by[f"evaluate/agentic/{stage}"]
        expert = by[f"rl/{stage}"]
        assert step.module == "chorus.evaluate" and step.after == [expert.name] and step.results_in_hydra_dir
        assert {"protocol=agentic", "protocol.rounds=1", "protocol.stop_at=pass", f"model.path={expert.run_dir / 'hf'}",
                "policy.temperature=0.5", "policy.max_new_tokens=192", "policy.max_prompt_tokens=512"} <= set(step.overrides)
        # the same held-out tasks and samples as the random baseline (and so as the experts)
        assert [o for o in step.overrides if o.startswith(("tasks", "n_samples", "format"))] == \
            [o for o in baseline if o.startswith(("tasks", "n_samples", "format"))]
        assert not in_report(step.name)
    for preset in ("staged", "study"):  # agentic_rounds defaults to 0: opt-in (v2's runs leave it out)
        _, steps = pipeline_cfg(f"runs_dir={runs}", f"pipeline={preset}", "seed=2")
        assert not any(s.name.startswith("evaluate/") for s in steps)
    with pytest.raises(ValueError, match="agentic_rounds=-1"):
        pipeline_cfg(f"runs_dir={runs}", "pipeline=study", "pipeline.controls.agentic_rounds=-1")


def test_a_staged_run_in_the_same_runs_dir_shares_the_sft_chain_and_stage0s_expert(study):
    runs, _, by = study
    _, staged = pipeline_cfg(f"runs_dir={runs}", "pipeline=staged", "seed=2")
    same = {s.name for s in staged if s.run_dir == by[s.name].run_dir}
    # replicate 0's RL seed does not depend on rl_seeds (seed + 1000 (i + 3 j)), so the study reuses
    # every step of the staged plan: the chain, the first experts, the consolidations, the baseline
    assert same == {s.name for s in staged}


def fake_run(run: Path, seed: int, pass_rate: float, machine: str = "x86_64, test CPU, 2 CPUs, no GPU") -> None:
    """A finished run as the study's reader sees it: a per-task table and a summary."""
    run.mkdir(parents=True, exist_ok=True)
    (run / "per_task.jsonl").write_text('{"task_id": "t0", "passed": true}\n')
    (run / "summary.json").write_text(json.dumps({"seed": seed, "pass_rate": pass_rate, "git_revision": "abc",
                                                  "machine": machine}))


def test_the_study_writes_a_v2_manifest_the_reader_reads_back(study, tmp_path):
    runs, _, by = study
    steps = list(by.values())
    seeds = {n: int(next(o for o in reversed(s.overrides) if o.startswith("seed="))[5:]) for n, s in by.items()
             if n.startswith(("rl/", "consolidation/", "control/"))}
    rates = {n: 0.01 * k for k, n in enumerate(seeds)}
    for name, seed in seeds.items():
        fake_run(by[name].run_dir, seed, rates[name])
    for stage in ("stage0", "stage1", "stage2"):
        fake_run(by[f"evaluate/agentic/{stage}"].run_dir, None, 0.5)
    section = write_study(steps, runs)
    m = read_manifest(runs)
    stages = ("stage0", "stage1", "stage2")
    assert m.design == 2 and m.rl_seeds_distinct()
    assert m.experts == {s: [by[f"rl/{s}{t}"].run_dir for t in ("", "-rl1", "-rl2")] for s in stages}
    assert m.consolidations == {k: by[f"consolidation/{k}"].run_dir for k in ("soup", "ties", "della", "opd")}
    assert m.families == [by[f"control/families/rl{i}"].run_dir for i in range(3)]
    assert m.families_opd == by["control/families/opd"].run_dir
    assert m.agentic == {s: by[f"evaluate/agentic/{s}"].run_dir for s in stages}
    assert m.opd_controls == {"staged/own_teacher": by["control/opd-own_teacher"].run_dir,
                              **{f"families/{k}": by[f"control/families/opd-{k}"].run_dir
                                 for k in ("own_teacher", "random", "no_gate")},
                              "families/soup": by["control/families/soup"].run_dir}
    assert not json.loads((runs / "controls.json").read_text())["experts"]["stage1"][0].startswith("/")
    # the Controls section: each expert's RL seed and Pass@1 %, and where the statistics come from
    for i, s in enumerate(stages):
        for j, t in enumerate(("", "-rl1", "-rl2")):
            n = f"rl/{s}{t}"
            assert f"| {s} | {2 + 1000 * (i + 3 * j)} | {100 * rates[n]:.1f} | {by[n].run_dir.name} |" in section
    assert f"python -m chorus.analyze study=[{runs}]" in section and "refuses this seed" not in section
    # a run from another machine kind: the section says what the study's reader will refuse
    fake_run(by["rl/stage2-rl2"].run_dir, seeds["rl/stage2-rl2"], 0.5, machine="aarch64, other, 8 CPUs, no GPU")
    refused = write_study(steps, runs)
    assert "refuses this seed: " in refused and "runs of mixed machine kinds" in refused


@pytest.mark.parametrize("setting, message", [
    ("pipeline.controls.rl_seeds=0", r"rl_seeds=0: set it to 1 or more"),
    ("pipeline.controls.families=[[counter,fsm],[fsm]]", "disjoint"),
])
def test_bad_controls_are_refused_before_anything_runs(tmp_path, setting, message):
    with pytest.raises(ValueError, match=message):
        pipeline_cfg(f"runs_dir={tmp_path}", "pipeline=study", setting)


def test_opds_gate_reference_names_a_stage_and_the_plan_wires_that_stages_expert_table(tmp_path):
    """consolidation.gate_reference=stage0 in a preset: OPD's gate compares teachers with what DAPO
    from stage 0 reaches, the stage-0 expert's table (so OPD waits for it); without tables, refused."""
    c, steps = pipeline_cfg(f"runs_dir={tmp_path}", "pipeline=tiny", "seed=3",
                            "pipeline.opd=['rl.steps=8','consolidation.gate_reference=stage0']")
    by = {s.name: s for s in steps}
    opd = by["consolidation/opd"]
    assert f"consolidation.gate_reference={by['tables/stage0'].run_dir}" in opd.overrides
    assert "tables/stage0" in opd.after
    assert not any(o.startswith("consolidation.gate_reference") for o in by["consolidation/soup"].overrides)
    with pytest.raises(ValueError, match="gate_reference=stage0 needs that stage's expert table; set "
                                         "pipeline.teacher_samples > 0") as err:
        pipeline_cfg(f"runs_dir={tmp_path}", "pipeline=tiny", "pipeline.teacher_samples=0",
                     "pipeline.opd=['rl.steps=8','consolidation.gate_reference=stage0']")
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_own_designs_pipeline_end_to_end_on_the_example_folder(tmp_path, cache_root):
    """pipeline=own_designs designs=examples/designs: ingest, the three stages' data from random bursts and
    the teacher (each stage's starting model), every step on the designs' own splits, REPORT.md."""
    env = {**__import__("os").environ, "CHORUS_CACHE_DIR": str(cache_root)}
    root = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, "-m", "chorus.pipeline", "pipeline=own_designs", f"runs_dir={tmp_path}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=root)
    assert p.returncode == 2 and p.stderr.strip() == ("chorus.pipeline: error: pipeline=own_designs runs on your own "
                                                      "designs: pass designs=<folder> (e.g. designs=examples/designs)")
    p = subprocess.run([*cmd, "designs=examples/designs"], capture_output=True, text=True, timeout=1200, env=env,
                       cwd=root)
    assert p.returncode == 0, p.stderr[-3000:]
    [tasks_file] = (tmp_path / "tasks").glob("tasks-*.jsonl")
    tasks = {t["id"]: t for t in map(json.loads, tasks_file.read_text().splitlines())}
    assert len(tasks) == len([d for d in (root / "examples/designs").iterdir() if d.is_dir()])
    report = (tmp_path / "REPORT.md").read_text()
    assert re.search(r"\| ingest \(8 designs: train \d, validation \d, test \d; 0 refused\) ", report)
    for row in ("sft/stage2", "dapo/stage0", "soup/three_experts", "opd/three_experts", "random stimulus"):
        assert f"| {row} " in report, row
    test_ids = sorted(k for k, t in tasks.items() if t["split"] == "test")
    expert = pd.read_parquet(next(tmp_path.glob("rl/dapo/stage0*/per_task.parquet")))
    assert sorted(set(expert["task_id"])) == test_ids  # evaluated on the test designs only
    for stage, kinds in (("stage0", {"validated"}), ("stage1", {"validated", "repair"}), ("stage2", {"validated", "repair"})):
        [data] = tmp_path.glob(f"sft/{stage}*/data")
        rows = pd.read_parquet(data / "train-00000-of-00001.parquet")
        assert set(rows["kind"]) == kinds and set(rows["split"]) == {"train"}, stage
        assert {tasks[t]["split"] for t in rows["task_id"]} == {"train"}
    info = json.loads(next(tmp_path.glob("sft/stage2*/stage.json")).read_text())
    assert len(info["task_weights"]) == sum(t["split"] == "train" for t in tasks.values())
