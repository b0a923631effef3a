"""OPD compares like with like: the gate's teacher values and the student's are pass rates over the
same kinds of rows (harness errors left out), and a lead of rounding size is no lead."""
import pytest

from chorus.opd.routing import route
from chorus.opd.teachers import Teacher, TeacherRewards, mean_rewards, table_rewards
from chorus.tracking.run_dir import write_run


# An evaluation's per-task table (rows as chorus.scoring.result_row writes them; target 90 %).
TEACHER_ROWS = [
    {"task_id": "t1", "status": "ok", "overall": 80.0, "passed": False},
    {"task_id": "t1", "status": "ok", "overall": 95.0, "passed": True},  # the one pass
    {"task_id": "t1", "status": "compile_error", "overall": None, "passed": False},
    {"task_id": "t1", "status": "harness_error", "overall": None, "passed": False},  # chorus's failure: left out
    {"task_id": "t1", "status": "empty", "overall": None, "passed": False},
    {"task_id": "t1", "status": "runtime_error", "overall": 30.0, "passed": False},
    {"task_id": "t2", "status": "harness_error", "overall": None, "passed": False},  # only harness errors
    {"task_id": "t2", "status": "harness_error", "overall": None, "passed": False},
    {"task_id": "t3", "status": "ok", "overall": 50.0, "passed": False},
]
T1 = 1 / 5  # by hand: one pass in five samples that are not harness errors (1 / 6 counting it)


@pytest.fixture
def teacher_table(tmp_path):
    write_run(tmp_path / "eval", TEACHER_ROWS, {})  # the real writer: jsonl + parquet (read first)
    return tmp_path / "eval"


def test_table_teacher_values_are_pass_rates_over_samples_without_harness_errors(teacher_table):
    assert table_rewards(str(teacher_table)) == {"t1": pytest.approx(T1), "t2": None, "t3": 0.0}


def test_the_gate_compares_the_teacher_and_the_student_on_one_pass_rate(teacher_table, tmp_path):
    """A student whose samples pass as often as the teacher's (harness errors left out on both sides)
    is not beaten (equal is not better); one that passes less is."""
    teacher = Teacher("a", str(tmp_path), "table", str(teacher_table))
    rewards = TeacherRewards([teacher], ["t1", "t3"], "error").for_tasks([_Task("t1")])
    assert rewards == {"t1": {"a": pytest.approx(T1)}}
    # the student's rollout rows, as OPDCollect.route averages them
    student = [{"task_id": "t1", "status": s, "passed": p} for s, p in
               [("runtime_error", False), ("harness_error", False), ("empty", False), ("ok", True),
                ("compile_error", False), ("ok", False)]]
    equal = mean_rewards(student)["t1"]
    assert equal == pytest.approx(T1)
    r = route(rewards["t1"], equal, margin=0.0)
    assert (r.teacher, r.reason) == (None, "student_not_beaten")
    assert route(rewards["t1"], equal - 0.01, margin=0.0).teacher == "a"


def test_a_lead_of_rounding_size_is_no_lead():
    """Equal values summed in another order differ in the last bits (here 0.32 against 0.31999999999999995):
    that makes no teacher better."""
    teacher, student = (0.8 + 1.2 - 0.5 - 0.2 + 0.3) / 5, (0.3 - 0.2 + 1.2 - 0.5 + 0.8) / 5
    assert teacher != student  # the float sums really differ
    assert route({"a": teacher}, student).reason == "student_not_beaten"
    assert route({"a": student + 4e-7}, student).reason == "student_not_beaten"
    assert route({"a": student + 2e-6}, student).reason == "best_teacher_beats_student"


class _Task:
    def __init__(self, i):
        self.id = i


def test_a_task_with_only_harness_errors_has_no_table_reward_and_follows_the_missing_policy(teacher_table, tmp_path):
    teacher = Teacher("a", str(tmp_path), "table", str(teacher_table))
    with pytest.raises(ValueError, match="lacks 1 of 3 training tasks.*1 of them with only harness errors"):
        TeacherRewards([teacher], ["t1", "t2", "t3"], "error")
    skipped = TeacherRewards([teacher], ["t1", "t2", "t3"], "skip").for_tasks([_Task("t2")])
    assert skipped == {"t2": {"a": None}} and route(skipped["t2"], 0.1).reason == "no_teacher_reward"
    asked = []

    def estimate(t, tasks):
        asked.append([x.id for x in tasks])
        return {x.id: 0.7 for x in tasks}

    online = TeacherRewards([teacher], ["t1", "t2", "t3"], "online", estimate)
    assert online.for_tasks([_Task("t1"), _Task("t2")]) == {"t1": {"a": pytest.approx(T1)}, "t2": {"a": 0.7}}
    assert asked == [["t2"]]


def test_a_table_without_the_reward_columns_is_refused_naming_the_fix(tmp_path):
    write_run(tmp_path / "old", [{"task_id": "t1", "overall": 80.0}], {})
    with pytest.raises(ValueError, match="no status/passed column.*chorus.evaluate"):
        table_rewards(str(tmp_path / "old"))
