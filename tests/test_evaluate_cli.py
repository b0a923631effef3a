"""python -m chorus.evaluate as users (and the bars) run it."""
import json
import os
import subprocess
import sys

import pandas as pd
import pytest

ROW_KEYS = {"task_id", "sample", "status", "overall", "metrics", "target", "passed", "instance_ok", "seconds"}


def evaluate(*overrides, cache_root):
    env = dict(os.environ, CHORUS_CACHE_DIR=str(cache_root))
    return subprocess.run([sys.executable, "-m", "chorus.evaluate", "progress=false", *overrides],
                          capture_output=True, text=True, env=env, timeout=600)


def test_reference_policy_writes_table_summary_and_parquet(tmp_path, cache_root):
    out = tmp_path / "run"
    p = evaluate("tasks=bundled", "tasks.split=test", "tasks.limit=2", "policy=reference",
                 f"hydra.run.dir={out}", cache_root=cache_root)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(l) for l in (out / "per_task.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(ROW_KEYS <= set(r) for r in rows)
    assert all(r["status"] == "ok" and r["passed"] for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_tasks"] == 2 and summary["pass_rate"] == 1.0
    assert summary["mean_overall"] == pytest.approx(sum(r["overall"] for r in rows) / 2)
    assert pd.read_parquet(out / "per_task.parquet")["task_id"].tolist() == [r["task_id"] for r in rows]


def test_file_policy_scores_files_and_reports_missing(tmp_path, cache_root):
    from chorus.tasks import load_tasks

    tasks = load_tasks("bundled", split="train", limit=2)
    tbs = tmp_path / "tbs"
    tbs.mkdir()
    (tbs / f"{tasks[0].id}.sv").write_text(tasks[0].reference_tb.replace("$finish", "$finish; $system(\"ls\")"))
    out = tmp_path / "run"
    p = evaluate("tasks=bundled", "tasks.split=train", "tasks.limit=2", "policy=file", f"policy.dir={tbs}",
                 "n_samples=2", f"hydra.run.dir={out}", cache_root=cache_root)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(l) for l in (out / "per_task.jsonl").read_text().splitlines()]
    assert [(r["task_id"], r["sample"], r["status"]) for r in rows] == [
        (tasks[0].id, 0, "rejected"), (tasks[0].id, 1, "rejected"), (tasks[1].id, 0, "missing"),
        (tasks[1].id, 1, "missing")]
    assert json.loads((out / "summary.json").read_text())["pass_rate"] == 0.0


@pytest.mark.parametrize("overrides, message", [
    (["tasks=nosuchsuite"], "nosuchsuite"),
    (["tasks=jsonl", "tasks.path=/no/such/file.jsonl"], "does not exist"),
    (["tasks=cvdp"], "needs tasks.path"),
    (["policy=file"], "policy=file needs policy.dir"),
    (["tasks.limit=many"], "limit"),
    (["tasks.split=dev"], "Invalid value 'dev', expected one of [train, validation, test, all]\n    full_key: tasks.split"),
])
def test_bad_input_gives_a_clear_error_without_traceback(tmp_path, cache_root, overrides, message):
    p = evaluate(*overrides, f"hydra.run.dir={tmp_path}", cache_root=cache_root)
    assert p.returncode != 0
    assert message in p.stderr and "Traceback" not in p.stderr


def test_cvdp_problems_load_through_the_cli(tmp_path, cache_root, cvdp_dir):
    p = evaluate("tasks=cvdp", f"tasks.path={cvdp_dir / 'cvdp_v1.0.2_cid012.jsonl'}", "policy=reference",
                 f"hydra.run.dir={tmp_path}", cache_root=cache_root)
    assert p.returncode == 0, p.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["n_tasks"] == 83 and summary["status_counts"] == {"missing": 83}


def test_generated_tasks_in_the_vectors_format_grade_reference_quality(tmp_path, cache_root):
    means = {}
    for quality in ("strong", "weak"):
        out = tmp_path / quality
        p = evaluate("tasks=generated", "tasks.per_family=1", "tasks.families=[counter,fsm]", "format=vectors",
                     "policy=reference", f"policy.quality={quality}", f"hydra.run.dir={out}", cache_root=cache_root)
        assert p.returncode == 0, p.stderr
        summary = json.loads((out / "summary.json").read_text())
        assert summary["n_tasks"] == 2 and summary["format"] == "vectors"
        means[quality] = (summary["pass_rate"], summary["mean_overall"])
    assert means["strong"][0] == 1.0 and means["weak"][0] == 0.0
    assert means["weak"][1] < means["strong"][1] - 30


def test_an_agentic_evaluation_records_its_stopping_rule(tmp_path, cache_root, tiny_xs):
    """summary.json says how an agentic run stopped its samples (protocol.stop_at), which decides
    under which pass rules it may be read (tracking/runs.py); a direct run records none; a bad one is
    refused at composition."""
    common = ["policy=model", "model=hf", f"model.path={tiny_xs}", "tasks=generated", "tasks.per_family=1",
              "tasks.families=[counter]", "tasks.split=all", "format=vectors", "n_samples=1",
              "policy.max_new_tokens=8"]
    for proto, stop in ((["protocol=agentic", "protocol.rounds=1", "protocol.stop_at=pass"], "pass"), ([], None)):
        out = tmp_path / (stop or "direct")
        p = evaluate(*common, *proto, f"hydra.run.dir={out}", cache_root=cache_root)
        assert p.returncode == 0, p.stderr
        assert json.loads((out / "summary.json").read_text()).get("stop_at") == stop
    p = evaluate(*common, "protocol=agentic", "protocol.stop_at=sometimes", f"hydra.run.dir={tmp_path / 'bad'}",
                 cache_root=cache_root)
    # refused while composing (the schema's enum), before a model loads: nothing written
    assert p.returncode != 0 and "Invalid value 'sometimes', expected one of [full, pass]" in p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "bad" / "summary.json").exists()
