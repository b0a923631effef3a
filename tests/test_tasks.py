"""Task schema, JSONL round trip, suite loading and the CVDP row format."""
import json

import pytest

from chorus.core.task import TaskFormatError, read_jsonl, write_jsonl
from chorus.tasks import load_bundled, load_tasks
from chorus.tasks.cvdp import instance_from_process, row_to_task


def test_jsonl_round_trip(tmp_path, counter_task):
    counter_task.defines = {"WIDTH": "8"}
    counter_task.spec_files = {"docs/spec.md": "# spec"}
    counter_task.reference_tb = "module tb; endmodule"
    path = tmp_path / "tasks.jsonl"
    write_jsonl([counter_task, counter_task], path)
    back = read_jsonl(path)
    assert [t.to_dict() for t in back] == [counter_task.to_dict()] * 2


@pytest.mark.parametrize("content, message", [
    ("{not json\n", "not valid JSON"),
    ('{"id": "x"}\n', "missing required field"),
    ('{"id": "x", "spec": "s", "rtl": {"a.sv": 1}, "top": "m", "instance": "u"}\n', "'rtl' must map"),
    ('{"id": "x", "spec": "s", "rtl": {"a.sv": "m"}, "top": "m", "instance": "u", "bogus": 1}\n', "unknown field"),
    ('[1, 2]\n', "expected a JSON object"),
    ("\n", "holds no tasks"),
])
def test_malformed_task_files_give_one_line_errors(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(TaskFormatError, match=message) as info:
        read_jsonl(path)
    assert "\n" not in str(info.value)


def test_missing_file_and_unknown_suite_name_the_fix(tmp_path):
    with pytest.raises(TaskFormatError, match="does not exist; pass tasks.path"):
        load_tasks("jsonl", path=str(tmp_path / "nope.jsonl"))
    with pytest.raises(TaskFormatError, match="unknown task suite 'nope'; choose one of"):
        load_tasks("nope")
    with pytest.raises(TaskFormatError, match="needs tasks.path"):
        load_tasks("cvdp")


def test_bundled_suite_shape():
    tasks = load_bundled()
    assert len(tasks) >= 40
    assert len({t.family for t in tasks}) >= 5
    assert len({t.id for t in tasks}) == len(tasks)
    assert {t.split for t in tasks} == {"train", "test"}
    assert all(80 <= t.target <= 100 for t in tasks)
    assert all(t.reference_tb and t.spec and t.instance for t in tasks)
    assert len({t.target for t in tasks}) >= 4  # a real mix of targets


def test_split_ids_and_limit_filters():
    test = load_tasks("bundled", split="test")
    assert test and all(t.split == "test" for t in test)
    one = load_tasks("bundled", ids=[test[0].id])
    assert [t.id for t in one] == [test[0].id]
    assert len(load_tasks("bundled", limit=3)) == 3
    with pytest.raises(TaskFormatError, match="not in the suite"):
        load_tasks("bundled", ids=["no_such_task"])


PROCESS_TEMPLATE = """import os
def test_simulate():
    cmd = "xrun -coverage all {define} /src/*.sv /code/verif/*.sv -covtest test"
def test_report():
    metrics = {{}}
{check}
"""


@pytest.mark.parametrize("check, env, expected", [
    ('    assert metrics["uut"]["Average"] >= float(os.getenv("TARGET"))', {}, "uut"),
    ('    dut = "door_inst"\n    assert float(metrics[dut]["Overall Average"]) >= 1', {}, "door_inst"),
    ('    assert metrics[os.getenv("TOPLEVEL")]["Overall Average"]', {"TOPLEVEL": "dut"}, "dut"),
    ('    assert metrics.get("uut", {}).get("Average", 0) >= 1', {}, "uut"),
    ('    name = os.getenv("TOP_MODULE", "top_inst")\n    for e in x:\n        if e["name"] == name: pass', {}, "top_inst"),
])
def test_instance_name_from_process_py(check, env, expected):
    assert instance_from_process(PROCESS_TEMPLATE.format(define="", check=check), env) == expected


def _rows():
    rtl = "module adder(input [3:0] a, output [3:0] y);\n  assign y = a + 1;\nendmodule\n"
    process = PROCESS_TEMPLATE.format(define="-define WIDTH=4 -define FAST", check='    metrics["dut"]')
    harness = {"src/.env": "HASH = x\nTARGET = 85\n", "src/process.py": process, "src/adder.sv": rtl,
               "docker-compose.yml": "services: {}"}
    copilot = {"id": "cvdp_copilot_adder_0001", "categories": ["cid012", "easy"],
               "input": {"prompt": "Write a testbench for the `adder` module.", "context": {}},
               "output": {"response": "", "context": {"verif/tb_adder.sv": ""}}, "harness": {"files": harness}}
    agentic = {"id": "cvdp_agentic_adder_0002", "categories": ["cid012", "medium"], "system_message": "...",
               "prompt": "Create a test bench for `adder`.", "context": {"docs/adder.md": "# adder"},
               "patch": {"verif/tb_adder.sv": ""}, "harness": harness}
    return copilot, agentic


def test_cvdp_rows_of_both_shapes_map_to_tasks():
    for row in _rows():
        t = row_to_task(row)
        assert (t.top, t.instance, t.target, t.defines) == ("adder", "dut", 85.0, {"WIDTH": "4", "FAST": ""})
        assert list(t.rtl) == ["adder.sv"] and t.tb_name == "tb_adder.sv" and t.source == "cvdp"
    assert row_to_task(_rows()[1]).spec_files == {"docs/adder.md": "# adder"}
    assert row_to_task(_rows()[1]).difficulty == "medium"


def test_cvdp_row_without_rtl_is_a_clear_error():
    row = _rows()[0]
    row["harness"]["files"] = {"src/.env": "TARGET = 90\n"}
    with pytest.raises(TaskFormatError, match="no RTL files"):
        row_to_task(row)


def test_official_cid012_file_loads_83_problems(cvdp_dir):
    tasks = load_tasks("cvdp", path=str(cvdp_dir / "cvdp_v1.0.2_cid012.jsonl"))
    assert len(tasks) == 83
    assert all(t.rtl and t.top and t.instance for t in tasks)
    assert sum(t.meta["has_target"] for t in tasks) == 83
    stopwatch = next(t for t in tasks if t.id == "cvdp_copilot_digital_stopwatch_0017")
    assert stopwatch.defines == {"CLK_FREQ": "200"}
    assert json.loads(json.dumps(tasks[0].to_dict()))["id"] == tasks[0].id


def test_a_world_prunes_design_classes_by_what_reaches_their_targets():
    """tasks.prune: glob patterns over family/difficulty/skills (the skills of the strategies that reach
    the calibrated target; `none` when none does); other suites refuse it in one line."""
    from chorus.tasks.generated import design_class

    every = load_tasks("generated", per_family=8, difficulty="mixed", split="validation", seed=100)
    classes = {t.id: design_class(t) for t in every}
    assert all(c.count("/") == 2 and c.split("/")[0] == t.family for t, c in zip(every, classes.values()))
    kept = load_tasks("generated", per_family=8, difficulty="mixed", split="validation", seed=100,
                      prune=["*/hard/*", "counter/*/*"])
    assert {t.id for t in kept} == {i for i, c in classes.items() if "/hard/" not in c and not c.startswith("counter/")}
    assert 0 < len(kept) < len(every)
    assert load_tasks("generated", per_family=8, difficulty="mixed", split="validation", seed=100, prune=[]) == every
    with pytest.raises(TaskFormatError, match="tasks.prune picks generated design classes"):
        load_tasks("bundled", prune=["*"])
