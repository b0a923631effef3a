"""Run records, the W&B mirror (offline), and the run-log reader."""
import json
import subprocess
import sys
from types import SimpleNamespace

import pandas as pd
import pytest
from run_fixtures import PASSES, rows_for, write_fixture_runs

from chorus.tracking.record import machine_kind, run_metadata
from chorus.tracking.run_dir import write_run
from chorus.tracking.runs import NoRunsError, find_run_dirs, load_runs, load_wandb_runs, wandb_filters
from chorus.tracking.wandb_mirror import per_task_frame, resolve_mode, summary_entries


def test_offline_wandb_run_next_to_the_per_task_files(tmp_path, cache_root):
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "chorus.evaluate", "tasks=bundled", "tasks.limit=2", "policy=reference",
                        f"hydra.run.dir={out}"], capture_output=True, text=True, timeout=300,
                       env={**__import__("os").environ, "CHORUS_CACHE_DIR": str(cache_root), "WANDB_MODE": "offline"})
    assert p.returncode == 0, p.stderr[-2000:]
    rows = pd.read_parquet(out / "per_task.parquet")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["job"] == "evaluate" and summary["policy"] == "reference" and "git_revision" in summary
    assert summary["machine"] == machine_kind()  # the job's process names this machine as this one does
    (run_dir,) = (out / "wandb").glob("offline-run-*")
    assert next(run_dir.glob("run-*.wandb")).stat().st_size > 0
    (table_file,) = run_dir.glob("files/media/table/per_task_*.table.json")
    table = json.loads(table_file.read_text())
    assert len(table["data"]) == len(rows) == 2
    assert table["columns"][0] == "task_id" and "metrics.block" in table["columns"]
    assert [r[0] for r in table["data"]] == rows["task_id"].tolist()


def test_every_summary_names_the_machine_kind_and_nothing_that_varies_between_runs():
    import os
    import platform
    import socket

    kind = machine_kind()
    assert kind.startswith(f"{platform.machine()}, ") and f", {os.cpu_count()} CPUs, " in kind
    assert socket.gethostname() not in kind.split(", ")  # no hostname: two machines of a kind read the same
    assert machine_kind() is kind  # read once per process
    assert run_metadata("rl", "tiny-s", 0)["machine"] == kind


def test_a_summary_becomes_wandb_summary_keys_flattened_as_run_settings_are():
    """summary.json as W&B summary keys: metadata as it is, timing under timing/, the rest under eval/, nested
    json joined by "/" (tracking.identity.flatten, the flattener of run settings): lists of dicts by index."""
    summary = {"job": "rl", "seed": 0, "timing": {"generation_s": 3.0, "sim": {"wait_s": 1.5}}, "pass_rate": 0.5,
               "status_counts": {"ok": 3, "compile_error": 1}, "stages": [{"n": 1}, {"n": 2}], "tags": ["a"],
               "empty": {}}
    assert summary_entries(summary) == {
        "job": "rl", "seed": 0, "timing/generation_s": 3.0, "timing/sim/wait_s": 1.5, "eval/pass_rate": 0.5,
        "eval/status_counts/ok": 3, "eval/status_counts/compile_error": 1, "eval/stages/0/n": 1, "eval/stages/1/n": 2,
        "eval/tags": ["a"]}


def test_logger_none_leaves_no_wandb_dir(tmp_path, cache_root):
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "chorus.evaluate", "tasks=bundled", "tasks.limit=1", "policy=reference",
                        "logger=none", f"hydra.run.dir={out}"], capture_output=True, text=True, timeout=300,
                       env={**__import__("os").environ, "CHORUS_CACHE_DIR": str(cache_root)})
    assert p.returncode == 0, p.stderr[-2000:]
    assert (out / "per_task.parquet").exists() and not (out / "wandb").exists()


def test_wandb_mode_needs_a_key_to_go_online(monkeypatch, tmp_path):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    assert resolve_mode("online") == "offline"
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    assert resolve_mode("online") == "online" and resolve_mode("offline") == "offline"
    with pytest.raises(ValueError, match="choose one of"):
        resolve_mode("cloud")


def test_a_glob_matching_nothing_says_so(tmp_path):
    with pytest.raises(NoRunsError, match="matches no run dirs.*quote the glob"):
        load_runs(str(tmp_path / "nothing/*"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(NoRunsError, match="matches no run dirs"):
        load_runs(str(tmp_path / "empty"))


def test_reader_finds_runs_skips_broken_ones_and_keeps_snapshots_inside_their_run(tmp_path):
    root = write_fixture_runs(tmp_path / "runs")
    snapshot = root / "rl/dapo/stage0/eval/step_2"
    write_run(snapshot, rows_for(PASSES["rl/dapo/stage0"]), {"n_tasks": 6})  # a periodic held-out table
    no_table = root / "rl/dapo/crashed"  # an RL run killed before its final evaluation
    no_table.mkdir(parents=True)
    (no_table / "steps.jsonl").write_text('{"step": 1}\n')
    empty = root / "consolidation/dare/three_experts"
    empty.mkdir(parents=True)
    (empty / "per_task.jsonl").write_text("")
    (empty / "summary.json").write_text("{}")

    for pattern in (str(root), str(root / "**")):
        dirs = find_run_dirs(pattern)
        assert snapshot not in dirs and root / "rl/dapo/stage0" in dirs
    runs = load_runs(str(root / "**"))
    assert sorted(runs.runs["run"]) == sorted(["dapo/stage0", "dapo/stage1", "dapo/stage2", "ties/three_experts",
                                               "opd/three_experts", "soup/three_experts"])
    skipped = dict(runs.skipped)
    assert skipped[str(no_table)] == "no per_task.parquet or per_task.jsonl"
    assert skipped[str(empty)] == "per-task table is empty"
    assert load_runs(str(root / "rl/dapo/stage0/eval/*")).runs["run"].tolist() == ["step_2"]

    t = runs.table
    assert len(t) == 6 * 6 * 2
    row = t[(t["run"] == "dapo/stage1")].iloc[0]
    assert (row["job"], row["rl_algo"], row["sft_stage"], row["model"]) == ("rl", "dapo", "stage1", "tiny-s")
    no_cov = t[(t["task_id"] == "t5") & (t["sample"] == 1)]
    assert no_cov["overall"].isna().all() and (no_cov["coverage"] == 0).all()


def test_the_same_job_from_two_seeds_gets_two_labels(tmp_path):
    write_fixture_runs(tmp_path / "s0", {"rl/dapo/stage0": PASSES["rl/dapo/stage0"]}, seed=0)
    write_fixture_runs(tmp_path / "s1", {"rl/dapo/stage0": PASSES["rl/dapo/stage1"]}, seed=1)
    runs = load_runs(str(tmp_path))
    assert runs.runs["run"].tolist() == ["dapo/stage0 (seed 0)", "dapo/stage0 (seed 1)"]


def test_wandb_reader_gives_the_columns_of_the_local_reader(tmp_path):
    import wandb

    root = write_fixture_runs(tmp_path, {"rl/dapo/stage2": PASSES["rl/dapo/stage2"]})
    local = load_runs(str(root))
    run_dir = root / "rl/dapo/stage2"
    table = wandb.Table(dataframe=per_task_frame(run_dir))  # what the mirror logs
    artifact = SimpleNamespace(type="run_table", name="run-abc-per_task:v0", get=lambda name: table)
    summary = json.loads((run_dir / "summary.json").read_text())
    logged = SimpleNamespace(path=["me", "chorus", "abc"], name="rl/dapo/stage2", summary=summary,
                             logged_artifacts=lambda: [artifact])
    bare = SimpleNamespace(path=["me", "chorus", "def"], name="x", summary={}, logged_artifacts=lambda: [])
    api = SimpleNamespace(runs=lambda project, filters=None: [logged, bare])
    remote = load_wandb_runs("me/chorus", api=api)
    assert remote.skipped == [("me/chorus/def", "no per_task table logged")]
    cols = [c for c in local.table.columns if c != "path"]
    pd.testing.assert_frame_equal(remote.table[cols].reset_index(drop=True), local.table[cols].reset_index(drop=True),
                                  check_dtype=False)


def test_wandb_runs_are_filtered_and_several_setups_are_not_pooled_unless_asked(tmp_path):
    import wandb

    assert wandb_filters("runs/pipeline/staged/seed0", ["job=rl", "model=tiny-xs"], "rl", {"rl.steps": 40}) == {
        "$and": [{"group": "runs/pipeline/staged/seed0"}, {"tags": {"$in": ["job=rl"]}},
                 {"tags": {"$in": ["model=tiny-xs"]}}, {"jobType": "rl"}, {"config.rl.steps": 40}]}
    assert wandb_filters() == {}
    root = write_fixture_runs(tmp_path, {k: PASSES[k] for k in ("rl/dapo/stage1", "rl/dapo/stage2")})
    logged = []
    for i, (label, group) in enumerate((("rl/dapo/stage1", "seed0"), ("rl/dapo/stage2", "seed1"))):
        table = wandb.Table(dataframe=per_task_frame(root / label))
        artifact = SimpleNamespace(type="run_table", name="run-x-per_task:v0", get=lambda name, t=table: t)
        summary = json.loads((root / label / "summary.json").read_text())
        logged.append(SimpleNamespace(path=["me", "chorus", f"r{i}"], name=label, summary=summary, group=group,
                                      logged_artifacts=lambda a=artifact: [a]))
    asked = []
    api = SimpleNamespace(runs=lambda project, filters=None: asked.append(filters) or logged)
    with pytest.raises(ValueError, match=r"come from 2 groups \(seed0, seed1\), i.e. different setups; pick one "
                                         r"with wandb_filter.group=<group>, or pool them with wandb_filter.mixed=true"):
        load_wandb_runs("me/chorus", api=api)
    assert len(load_wandb_runs("me/chorus", api=api, mixed=True).runs) == 2
    one = load_wandb_runs("me/chorus", {"$and": [{"group": "seed0"}]},
                          api=SimpleNamespace(runs=lambda project, filters=None: asked.append(filters) or logged[:1]))
    assert one.runs["run"].tolist() == ["dapo/stage1"] and asked[-1] == {"$and": [{"group": "seed0"}]}
