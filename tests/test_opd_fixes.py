"""OPD compares like with like: the direct divergences at the sampling temperature, and the gate's
teacher rewards from the student's own reward() (penalties, bonus, harness errors left out)."""
import math

import pytest
import torch

from chorus.config.schema import ConsolidationConf, RewardConfig
from chorus.core.modes import OPDMode
from chorus.opd.losses import generalized_jsd, reverse_kl
from chorus.opd.routing import route
from chorus.opd.teachers import Teacher, TeacherRewards, table_rewards
from chorus.rl.rewards import reward
from chorus.tracking.run_dir import write_run
from helpers import rl_settings


def _kl(p, q):
    return sum(a * math.log(a / b) for a, b in zip(p, q))


# Two-token vocabulary. Student logits [0, ln 2], teacher [ln 3, 0]:
# at T=1 pi_s = (1/3, 2/3), pi_t = (3/4, 1/4); at T=0.5 (logits doubled) pi_s = (1/5, 4/5), pi_t = (9/10, 1/10).
STUDENT, TEACHER = [0.0, math.log(2)], [math.log(3), 0.0]
AT = {1.0: ((1 / 3, 2 / 3), (3 / 4, 1 / 4)), 0.5: ((1 / 5, 4 / 5), (9 / 10, 1 / 10))}


def _logits(row):  # [1, 2 positions, 2 tokens]; the second position is masked out
    return torch.tensor([[row, [5.0, -5.0]]])


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_direct_divergences_at_the_sampling_temperature_hand_computed(temperature):
    p_s, p_t = AT[temperature]
    mask = torch.tensor([[1.0, 0.0]])
    got = float(reverse_kl(_logits(STUDENT), _logits(TEACHER), mask, 2.0, temperature=temperature))
    assert got == pytest.approx(_kl(p_s, p_t) / 2, rel=1e-6)
    for beta in (0.5, 0.25):
        m = [beta * t + (1 - beta) * s for s, t in zip(p_s, p_t)]
        want = beta * _kl(p_t, m) + (1 - beta) * _kl(p_s, m)
        got = float(generalized_jsd(_logits(STUDENT), _logits(TEACHER), mask, 1.0, beta=beta, temperature=temperature))
        assert got == pytest.approx(want, rel=1e-6)
    # the temperature changes the divergence here: T=0.5 sharpens two distributions that disagree
    assert _kl(*AT[0.5]) > 2 * _kl(*AT[1.0])


def test_opd_direct_micro_loss_compares_the_distributions_the_student_samples_from(tiny_xs, cache_root):
    """OPDModule.micro_loss (mode=direct, reverse KL) with a real tiny student and a real tiny teacher
    (another seed, same tokenizer) equals the reverse KL of softmax(logits / rl.temperature)."""
    from chorus.opd.module import OPDModule
    from chorus.opd.rollouts import OPDBatch, TeacherModels
    from chorus.policy.models import load_model
    from chorus.policy.tiny import build_tiny
    from chorus.rl.algos import OPD_ALGO
    from chorus.rl.logprobs import forward_logprobs
    from chorus.rl.module import Hooks

    teacher_dir = build_tiny("xs", seed=1, cache_root=cache_root)
    student, _ = load_model("hf", path=str(tiny_xs))
    teacher, _ = load_model("hf", path=str(teacher_dir))
    torch.manual_seed(0)
    ids = torch.randint(5, 200, (2, 7))
    attn = torch.ones_like(ids)
    mask = torch.zeros(2, 7)
    mask[:, 3:] = 1.0  # the completion: tokens 3..6
    batch = OPDBatch(ids, attn, mask, torch.zeros(2, 7), torch.zeros(2), rows=[{}, {}],
                     teacher_logprobs=torch.zeros(2, 7), teacher_of=["t", "t"])
    with torch.no_grad():
        z_s, z_t = student(input_ids=ids).logits.float(), teacher(input_ids=ids).logits.float()
    losses = {}
    for temp in (0.5, 1.0):
        module = OPDModule(student, OPD_ALGO, rl_settings(temperature=temp), Hooks(rollout=lambda step: None), {},
                           opd=ConsolidationConf(name="opd", mode=OPDMode.direct),
                           teachers=TeacherModels([Teacher("t", str(teacher_dir), "online")]))
        with torch.no_grad():
            fwd = forward_logprobs(student, ids, attn, mask, temp)
            loss, _ = module.micro_loss(batch, slice(0, 2), ids, attn, mask, fwd, 8.0)
        # position k's distribution predicts token k+1: completion tokens 3..6 are scored at positions 2..5
        p_s, p_t = torch.softmax(z_s[:, 2:6] / temp, -1), torch.softmax(z_t[:, 2:6] / temp, -1)
        want = float((p_s * (p_s.log() - p_t.log())).sum()) / 8.0
        assert float(loss) == pytest.approx(want, rel=1e-4)
        losses[temp] = float(loss)
    assert abs(losses[0.5] - losses[1.0]) > 1e-3 * losses[1.0]  # so the check above can tell the two apart


CFG = RewardConfig(compile_penalty=-0.5, empty_penalty=-0.2, pass_bonus=0.25)

# An evaluation's per-task table (rows as chorus.scoring.result_row writes them; target 90 %).
TEACHER_ROWS = [
    {"task_id": "t1", "status": "ok", "overall": 80.0, "passed": False},  # 0.8
    {"task_id": "t1", "status": "ok", "overall": 95.0, "passed": True},  # 0.95 + bonus 0.25 = 1.2
    {"task_id": "t1", "status": "compile_error", "overall": None, "passed": False},  # penalty -0.5
    {"task_id": "t1", "status": "harness_error", "overall": None, "passed": False},  # chorus's failure: left out
    {"task_id": "t1", "status": "empty", "overall": None, "passed": False},  # penalty -0.2
    {"task_id": "t1", "status": "runtime_error", "overall": 30.0, "passed": False},  # the coverage reached: 0.3
    {"task_id": "t2", "status": "harness_error", "overall": None, "passed": False},  # only harness errors
    {"task_id": "t2", "status": "harness_error", "overall": None, "passed": False},
    {"task_id": "t3", "status": "ok", "overall": 50.0, "passed": False},
]
T1 = (0.8 + 1.2 - 0.5 - 0.2 + 0.3) / 5  # by hand: 0.32 (coverage / 100 with harness errors as 0 gave 2.05 / 6)


@pytest.fixture
def teacher_table(tmp_path):
    write_run(tmp_path / "eval", TEACHER_ROWS, {})  # the real writer: jsonl + parquet (read first)
    return tmp_path / "eval"


def test_table_teacher_rewards_are_the_mean_reward_over_samples_without_harness_errors(teacher_table):
    got = table_rewards(str(teacher_table), CFG)
    assert got == {"t1": pytest.approx(T1), "t2": None, "t3": pytest.approx(0.5)}
    # the same rows through the one reward() function, harness errors excluded
    values = [reward(r["status"], r["overall"], r["passed"], CFG) for r in TEACHER_ROWS if r["task_id"] == "t1"]
    assert got["t1"] == pytest.approx(sum(v for v in values if v is not None) / 5)


def test_the_gate_compares_the_teacher_and_the_student_on_one_reward(teacher_table, tmp_path):
    """A student whose samples score what the teacher's do under reward() is not beaten (equal is not
    better); one a little lower is. With coverage / 100 (harness errors as 0) the teacher had 0.342 and
    beat the equal student."""
    teacher = Teacher("a", str(tmp_path), "table", str(teacher_table))
    rewards = TeacherRewards([teacher], ["t1", "t3"], "error", reward_cfg=CFG).for_tasks([_Task("t1")])
    assert rewards == {"t1": {"a": pytest.approx(T1)}}
    # the student's rollout rewards, as collect_opd averages them: reward() per sample, harness errors left out
    student = [("runtime_error", 30.0, False), ("harness_error", None, False), ("empty", None, False),
               ("ok", 95.0, True), ("compile_error", None, False), ("ok", 80.0, False)]
    valid = [v for v in (reward(s, o, p, CFG) for s, o, p in student) if v is not None]
    equal = sum(valid) / len(valid)
    assert equal == pytest.approx(T1)
    r = route(rewards["t1"], equal, margin=0.0)
    assert (r.teacher, r.reason) == (None, "student_not_beaten")
    assert route(rewards["t1"], equal - 0.01, margin=0.0).teacher == "a"


def test_a_lead_of_rounding_size_is_no_lead():
    """Equal rewards summed in another order differ in the last bits (here 0.32 against 0.31999999999999995),
    and tables round coverage to 1e-4 % (1e-6 of reward): neither makes a teacher better."""
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
        TeacherRewards([teacher], ["t1", "t2", "t3"], "error", reward_cfg=CFG)
    skipped = TeacherRewards([teacher], ["t1", "t2", "t3"], "skip", reward_cfg=CFG).for_tasks([_Task("t2")])
    assert skipped == {"t2": {"a": None}} and route(skipped["t2"], 0.1).reason == "no_teacher_reward"
    asked = []

    def estimate(t, tasks):
        asked.append([x.id for x in tasks])
        return {x.id: 0.7 for x in tasks}

    online = TeacherRewards([teacher], ["t1", "t2", "t3"], "online", estimate, reward_cfg=CFG)
    assert online.for_tasks([_Task("t1"), _Task("t2")]) == {"t1": {"a": pytest.approx(T1)}, "t2": {"a": 0.7}}
    assert asked == [["t2"]]


def test_a_table_without_the_reward_columns_is_refused_naming_the_fix(tmp_path):
    write_run(tmp_path / "old", [{"task_id": "t1", "overall": 80.0}], {})
    with pytest.raises(ValueError, match="no status/passed column.*chorus.evaluate"):
        table_rewards(str(tmp_path / "old"), CFG)
