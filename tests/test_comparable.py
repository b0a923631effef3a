"""Which loaded runs the notebooks compare (chorus.analysis.comparable): the experts' split, on tasks the
experts share; runs of another split or sharing no task set apart, one line each; experts sharing no
task refused in one line naming them."""
import pytest
from run_fixtures import PASSES, meta_for, rows_for

from chorus.analysis.comparable import NoSharedTasksError, comparable_runs
from chorus.tracking.run_dir import write_run
from chorus.tracking.runs import load_runs
from chorus.tracking.summary import summarize


def write(root, rel, tasks, split="test", job_meta=None):
    rows = [{**r, "split": split} for r in rows_for([[1, 0]] * len(tasks), tasks)]
    write_run(root / rel, rows, {**summarize(rows), **(job_meta or meta_for(rel))})


def test_a_pipelines_gate_tables_on_the_training_split_are_set_apart(tmp_path):
    for rel in PASSES:
        write(tmp_path, rel, ["t0", "t1", "t2"])
    gate = {"job": "evaluate", "policy": "model", "model": "hf", "seed": 0}
    write(tmp_path, "tables/stage0-1a2b3c4d", ["g0", "g1"], split="train", job_meta=gate)
    c = comparable_runs(load_runs(str(tmp_path)))
    assert c.split == "test" and sorted(c.runs.runs["run"]) == sorted(load_runs(str(tmp_path / "[rc]*")).runs["run"])
    assert set(c.runs.table["split"]) == {"test"}
    assert c.messages == ["set apart stage0-1a2b3c4d: its 2 tasks are on the train split, the experts' on test"]
    apart = c.set_apart.iloc[0]
    assert (apart["split"], apart["n_tasks"], apart["pass_at_1"]) == ("train", 2, 0.5)


def test_a_run_sharing_no_task_with_the_experts_is_set_apart_and_experts_sharing_none_are_refused(tmp_path):
    for rel in ("rl/dapo/stage0", "rl/dapo/stage1", "consolidation/soup/three_experts"):
        write(tmp_path, rel, ["t0", "t1"])
    write(tmp_path, "consolidation/ties/three_experts", ["t7"])
    c = comparable_runs(load_runs(str(tmp_path)))
    assert c.messages == ["set apart ties/three_experts: none of its 1 tasks is among the 2 the experts share"]
    write(tmp_path, "rl/dapo/stage2", ["t8", "t9"])
    with pytest.raises(NoSharedTasksError) as err:
        comparable_runs(load_runs(str(tmp_path)))
    line = ("the experts dapo/stage0 (2 tasks), dapo/stage1 (2 tasks), dapo/stage2 (2 tasks) share no task: there "
            "is nothing to compare them on; point at runs scored on the same tasks (or name the experts to compare)")
    assert str(err.value) == line
    assert err.value._render_traceback_() == [f"NoSharedTasksError: {line}"]  # what a notebook shows: this line alone


def test_named_experts_pick_the_split_and_must_share_one_and_tables_without_a_split_are_kept(tmp_path):
    write(tmp_path, "rl/dapo/stage0", ["t0"], split="validation")
    write(tmp_path, "rl/dapo/stage1", ["t0"], split="validation")
    write(tmp_path, "rl/dapo/stage2", ["t0"], split="test")
    assert comparable_runs(load_runs(str(tmp_path))).split == "validation"  # most experts
    assert comparable_runs(load_runs(str(tmp_path)), ["dapo/stage2"]).messages[0].endswith("the experts' on test")
    with pytest.raises(NoSharedTasksError, match=r"dapo/stage1 \(validation\), dapo/stage2 \(test\) were scored on"):
        comparable_runs(load_runs(str(tmp_path)), ["dapo/stage1", "dapo/stage2"])
    runs = load_runs(str(tmp_path))
    runs.table = runs.table.drop(columns="split")  # runs written before per-task tables said their split
    c = comparable_runs(runs)
    assert c.split is None and not c.messages and len(c.runs.runs) == 3
