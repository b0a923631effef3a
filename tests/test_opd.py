"""Reward-gated multi-teacher OPD: routing and losses on hand values, teacher rewards, tiny runs."""
import dataclasses
import json
import shutil

import pytest
import torch

from chorus.config.schema import OPDConf, TeacherPoolConf
from chorus.opd.losses import pg_advantages
from chorus.opd.routing import ROUTINGS, route, route_no_gate, route_random
from chorus.rl.losses import clipped_pg_loss
from chorus.opd.run import train_opd
from chorus.opd.teachers import Teacher, TeacherRewards
from chorus.tracking.progress import Progress
from helpers import context, lines, rl_settings, weights


def test_route_picks_the_best_teacher_only_when_it_beats_the_student_by_the_margin():
    r = route({"a": 0.5, "b": 0.8}, 0.6, margin=0.1)
    assert (r.teacher, r.reason, r.teacher_reward, r.student_reward) == ("b", "best_teacher_beats_student", 0.8, 0.6)
    assert route({"a": 0.5, "b": 0.8}, 0.75, margin=0.1).reason == "student_not_beaten"
    assert route({"a": 0.5}, 0.5).teacher is None  # equal is not better
    assert route({"a": None, "b": None}, 0.2).reason == "no_teacher_reward"
    assert route({"a": None, "b": 0.3}, 0.2).teacher == "b"  # a teacher without a reward is ignored
    assert route({"a": 0.9}, None).reason == "no_student_reward"  # e.g. every student sample hit a harness error


def test_route_breaks_ties_by_pool_order_not_dict_order():
    assert route({"b": 0.8, "a": 0.8}, 0.1).teacher == "a"
    assert route({"a": 0.8, "b": 0.8}, 0.1, order=["b", "a"]).teacher == "b"


def test_the_controls_routings_each_change_one_thing():
    """random keeps the gate's decision and draws the teacher; no_gate keeps the best teacher and drops
    the gate (the student's lead no longer skips a task)."""
    import random

    rewards = {"a": 0.5, "b": 0.8, "c": None}
    # the student is ahead: gated and random skip, no_gate still routes to the best
    assert route_random(rewards, 0.9, rng=random.Random(0)).teacher is None
    nogate = route_no_gate(rewards, 0.9)
    assert (nogate.teacher, nogate.reason, nogate.teacher_reward) == ("b", "no_gate", 0.8)
    assert route_no_gate({"a": None}, 0.1).reason == "no_teacher_reward"
    # the student is behind: random draws among the teachers with a reward, uniformly (never c)
    rng = random.Random(1)
    drawn = [route_random(rewards, 0.1, rng=rng).teacher for _ in range(2000)]
    assert set(drawn) == {"a", "b"} and abs(drawn.count("a") / 2000 - 0.5) < 0.05
    again = random.Random(1)
    assert [route_random(rewards, 0.1, rng=again).teacher for _ in range(2000)] == drawn  # reproducible
    assert set(ROUTINGS) == {"gated", "random", "no_gate"} and ROUTINGS["gated"] is route


def test_the_pass_rate_gate_compares_the_share_of_passing_samples(tmp_path):
    """The gate compares pass rates: a teacher's value is its share of passing samples (harness errors
    left out), so a teacher with higher coverage that passes less is not the better one."""
    from chorus.opd.teachers import mean_rewards

    rows = [{"task_id": "t", "status": "ok", "overall": 90.0, "passed": False},
            {"task_id": "t", "status": "ok", "overall": 100.0, "passed": True},
            {"task_id": "t", "status": "compile_error", "overall": None, "passed": False},
            {"task_id": "t", "status": "harness_error", "overall": None, "passed": False},
            {"task_id": "u", "status": "harness_error", "overall": None, "passed": False}]
    assert mean_rewards(rows) == {"t": pytest.approx(1 / 3), "u": None}
    (tmp_path / "per_task.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = TeacherRewards([Teacher("a", str(tmp_path), "table", str(tmp_path))], ["t"]).for_tasks([FakeTask("t")])
    assert got == {"t": {"a": pytest.approx(1 / 3)}}


def test_the_per_token_advantage_hand_computed():
    logp = torch.tensor([[-1.0, -2.0]])
    same, _ = clipped_pg_loss(logp, logp, pg_advantages(logp, logp), torch.ones(1, 2))
    assert float(same) == 0.0
    adv = pg_advantages(torch.tensor([[-1.0, -2.0]]), torch.tensor([[-0.5, -3.0]]))
    assert adv.tolist() == [[0.5, -1.0]]  # the teacher likes token 1 more, token 2 less


class FakeTask:
    def __init__(self, i):
        self.id = i


def test_teacher_rewards_from_tables_online_and_the_missing_policy(tmp_path):
    table = tmp_path / "per_task.jsonl"
    table.write_text("".join(json.dumps(r) + "\n" for r in [
        {"task_id": "t1", "status": "ok", "overall": 80.0, "passed": True},
        {"task_id": "t1", "status": "compile_error", "overall": None, "passed": False},
        {"task_id": "t2", "status": "ok", "overall": 50.0, "passed": False}]))
    tab = Teacher("a", str(tmp_path), "table", str(tmp_path))
    online = Teacher("b", str(tmp_path), "online")
    asked = []

    def estimate(teacher, tasks):
        asked.append((teacher.name, [t.id for t in tasks]))
        return {t.id: 0.25 for t in tasks}

    with pytest.raises(ValueError, match="lacks 1 of 3 training tasks.*teacher_pool.missing=online"):
        TeacherRewards([tab, online], ["t1", "t2", "t3"], "error", estimate)
    rewards = TeacherRewards([tab, online], ["t1", "t2", "t3"], "skip", estimate, cache=tmp_path / "cache.jsonl")
    got = rewards.for_tasks([FakeTask("t1"), FakeTask("t3")])
    assert got == {"t1": {"a": pytest.approx(0.5), "b": 0.25}, "t3": {"a": None, "b": 0.25}}
    rewards.for_tasks([FakeTask("t1")])  # online rewards are estimated once per task
    assert asked == [("b", ["t1", "t3"])]
    again = TeacherRewards([tab, online], ["t1", "t2", "t3"], "online", estimate, cache=tmp_path / "cache.jsonl")
    assert again.for_tasks([FakeTask("t3")])["t3"] == {"a": 0.25, "b": 0.25}  # a's gap filled online
    assert asked[-1] == ("a", ["t3"])  # b came from the cache written by the first run
    assert again.fallback == {"a": 1} and rewards.fallback == {}  # how many tasks a's table lacked


def table_reward(name: str, task_index: int) -> float:
    """Evaluation tables for the pool (4 samples a task): 'good' passes 3 of 4 everywhere, 'spiky' all 4
    on every other task and none on the rest."""
    return 0.75 if name == "good" else (1.0 if task_index % 2 == 0 else 0.0)


@pytest.fixture(scope="module")
def pool(sft_xs, tiny_xs, rl_tasks, tmp_path_factory):
    """Three tiny teachers: two with evaluation tables, the untrained model estimated online."""
    root = tmp_path_factory.mktemp("pool")
    teachers = []
    for name in ("good", "spiky"):
        shutil.copytree(sft_xs, root / name)
        (root / f"{name}_eval").mkdir()
        (root / f"{name}_eval/per_task.jsonl").write_text("".join(
            json.dumps({"task_id": t.id, "status": "ok", "overall": 50.0, "passed": k < 4 * table_reward(name, i),
                        "sample": k}) + "\n" for i, t in enumerate(rl_tasks) for k in range(4)))
        teachers.append(Teacher(name, str(root / name), "table", str(root / f"{name}_eval")))
    # the untrained model as a third teacher: a copy, since the tests' student is tiny_xs itself and a
    # student is never one of its own teachers
    shutil.copytree(tiny_xs, root / "random")
    return teachers + [Teacher("random", str(root / "random"), "online")]


# margin 0, gated routing: the schema's defaults (the paper's rule); teachers loaded one at a time or kept
OPD = OPDConf(teachers_in_memory=False)


@pytest.mark.parametrize("opd", [OPD, OPDConf(teachers_in_memory=True)])
def test_tiny_opd_routes_to_the_better_teacher_and_updates_the_student(opd, pool, tiny_xs, rl_tasks, eval_tasks,
                                                                        sim, tmp_path):
    info = train_opd(str(tiny_xs), TeacherPoolConf(teachers=pool, online_samples=2), rl_tasks, eval_tasks[:1],
                     context(tmp_path, sim, progress=Progress(tmp_path)), opd=opd,
                     rl=rl_settings(steps=1, prompts_per_step=3, group_size=2))
    decisions = lines(tmp_path / "decisions.jsonl")
    assert len(decisions) == 3 and {d["step"] for d in decisions} == {1}
    index = {t.id: i for i, t in enumerate(rl_tasks)}
    for d in decisions:  # the routing follows the tables: spiky where it passes every sample, else good
        i = index[d["task_id"]]
        assert d["teacher_rewards"]["good"] == pytest.approx(table_reward("good", i))
        assert d["teacher_rewards"]["spiky"] == pytest.approx(table_reward("spiky", i))
        assert d["teacher"] == ("spiky" if i % 2 == 0 else "good") and d["reason"] == "best_teacher_beats_student"
        assert d["student_reward"] < d["teacher_reward"] == max(d["teacher_rewards"].values())
    step = lines(tmp_path / "steps.jsonl")[0]
    counts = {n: sum(d["teacher"] == n for d in decisions) for n in ("good", "spiky", "random")}
    assert {n: step[f"route_{n}"] for n in counts} == counts and step["skip_fraction"] == 0.0
    assert all(step[f"kl_{n}"] != 0 for n in counts if counts[n])
    assert step["update_skipped"] == 0 and info["teachers"] == ["good", "spiky", "random"]
    assert info["student"] == str(tiny_xs)  # what the analysis compares the OPD run with
    before, after = weights(tiny_xs), weights(tmp_path / "hf")
    assert any(not torch.equal(before[k], after[k]) for k in before)
    estimated = lines(tmp_path / "teacher_rewards.jsonl")  # only the online teacher, once per drawn task
    assert sorted(r["task_id"] for r in estimated) == sorted(d["task_id"] for d in decisions)
    assert {r["teacher"] for r in estimated} == {"random"}
    # the online estimate is a progress phase of its own: 2 samples for each of the 3 drawn tasks
    counts = [(p["done"], p["total"]) for p in lines(tmp_path / "progress.jsonl")
              if p["phase"] == "teacher rewards random"]
    assert counts[0] == (0, 6) and counts[-1] == (6, 6)
    assert (tmp_path / "per_task.parquet").exists()


def test_student_init_is_the_soup_a_stage_or_a_path_never_a_teacher(pool, tiny_xs, tmp_path):
    from chorus.opd.run import check_student, resolve_student

    soup = resolve_student("soup", pool[:2], tmp_path / "runs", tmp_path / "out")
    assert json.loads((tmp_path / "out/student_soup/merge.json").read_text())["method"] == "soup"
    assert soup == str(tmp_path / "out/student_soup")
    # a teacher, by name or teacher:<name> (three_experts' teachers share the stages' names), is refused
    staged = [dataclasses.replace(t, name=f"stage{i}") for i, t in enumerate(pool)]
    for choice in ("spiky", "teacher:spiky"):
        with pytest.raises(ValueError, match="one of the pool's teachers: .* only the own-teacher control"):
            resolve_student(choice, pool, tmp_path / "runs", tmp_path / "out")
    with pytest.raises(ValueError, match="one of the pool's teachers"):
        resolve_student("teacher:stage1", staged, tmp_path / "runs", tmp_path / "out")
    # ... and so is a path that is a teacher's checkpoint
    with pytest.raises(ValueError, match="is teacher spiky's checkpoint"):
        check_student(pool[1].checkpoint, pool)
    assert resolve_student(str(tiny_xs), pool, tmp_path / "runs", tmp_path / "out") == str(tiny_xs)
    with pytest.raises(FileNotFoundError, match="job=sft sft_stage=stage1"):
        resolve_student("stage1", pool, tmp_path / "runs", tmp_path / "out")
    with pytest.raises(ValueError, match="neither soup, a stage .* nor a checkpoint directory"):
        resolve_student("nobody", pool, tmp_path / "runs", tmp_path / "out")


def test_a_teacher_with_another_tokenizer_is_refused_in_one_line(pool, tiny_xs, tmp_path):
    from chorus.opd.run import check_student
    from chorus.policy.models import load_tokenizer

    other = tmp_path / "other"
    shutil.copytree(pool[0].checkpoint, other)
    tok = load_tokenizer(str(other))
    tok.add_tokens(["<extra_token>"])
    tok.save_pretrained(str(other))
    check_student(str(tiny_xs), pool)  # one tokenizer across the pool: accepted
    with pytest.raises(ValueError, match=r"teacher odd's tokenizer differs from the student's \(\d+ vs \d+ tokens, "
                                         r"1 entries differ\)") as err:
        check_student(str(tiny_xs), [*pool, Teacher("odd", str(other), "online")])
    assert "\n" not in str(err.value)


def test_a_teacher_identical_to_the_student_is_at_zero_kl_at_the_sampling_temperature(sft_xs, rl_tasks, eval_tasks,
                                                                                      sim, tmp_path):
    """Student and teacher log-probs are compared at the same (here 0.5) temperature: a teacher with the
    student's own weights gives KL 0 (at T=1 for the teacher alone it would not)."""
    table = tmp_path / "self_eval"
    table.mkdir()
    (table / "per_task.jsonl").write_text("".join(
        json.dumps({"task_id": t.id, "status": "ok", "overall": 100.0, "passed": True}) + "\n" for t in rl_tasks))
    shutil.copytree(sft_xs, tmp_path / "same_weights")  # the student's weights under another name
    teacher = Teacher("self", str(tmp_path / "same_weights"), "table", str(table))
    train_opd(str(sft_xs), TeacherPoolConf(teachers=[teacher]), rl_tasks, eval_tasks[:1],
              context(tmp_path / "run", sim), opd=OPD,
              rl=rl_settings(steps=1, prompts_per_step=2, group_size=2, temperature=0.5, lr=0.0))
    step = lines(tmp_path / "run/steps.jsonl")[0]
    assert step["route_self"] == 2 and abs(step["kl_self"]) < 1e-3


@pytest.mark.slow
def test_with_vllm_teachers_run_while_the_engine_sleeps_and_the_online_estimate_loads_no_extra_teacher(
        sft_xs, tiny_xs, rl_tasks, sim, tmp_path, monkeypatch):
    """engine=vllm (tests/vllm_standin.py): the engine sleeps once the student's samples are drawn, so
    the online reward estimate (teacher samples) and the teachers' scoring run beside a sleeping
    engine; the update's sync wakes it. The estimate generates with the teacher already loaded: the
    teacher's weights are loaded once, and its rewards are those of a fresh copy of it (the old way)."""
    from transformers import AutoModelForCausalLM

    import vllm_standin
    from chorus.opd.rollouts import TeacherModels
    from chorus.opd.teachers import mean_rewards
    from chorus.policy.engines import HFEngine, SamplingParams
    from chorus.policy.models import load_model
    from chorus.protocol.direct import run_direct

    vllm_standin.install(monkeypatch)
    vllm_standin.BUILT.clear()
    loads, load = [], AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", lambda where, **kw: (loads.append(str(where)),
                                                                                       load(where, **kw))[1])
    use = TeacherModels.use

    def recorded_use(self, name):  # each time a teacher runs, in the engine's own call record
        vllm_standin.BUILT[-1].calls.append(f"teacher {name}")
        return use(self, name)
    monkeypatch.setattr(TeacherModels, "use", recorded_use)
    rl = rl_settings(engine="vllm", steps=1, prompts_per_step=2, group_size=2, max_new_tokens=48)
    ctx = context(tmp_path, sim, progress=Progress(tmp_path))
    train_opd(str(tiny_xs), TeacherPoolConf(teachers=[Teacher("sft", str(sft_xs), "online")], online_samples=2),
              rl_tasks, [], ctx, opd=OPDConf(), rl=rl)
    [llm] = vllm_standin.BUILT
    calls = [c for c in llm.calls if c != "generate"]
    # the first sync at train start; the student samples; the engine sleeps; the teacher estimates
    # (and scores, where it was routed); the update's sync wakes the engine
    start = calls.index("sleep1")
    assert calls[:start] == ["load", "reset"] and calls[start + 1] == "teacher sft"
    wake = calls.index("wake:weights")
    assert set(calls[start + 1:wake]) == {"teacher sft"}
    assert calls[wake:] == ["wake:weights", "load", "reset", "wake:kv_cache"]
    assert "generate" not in llm.calls[llm.calls.index("sleep1"):llm.calls.index("wake:weights")]
    assert loads.count(str(sft_xs)) == 1  # the teacher, once: no second copy for the online estimate
    # the estimate equals the old way's: a fresh copy of the teacher with its tokenizer, same settings
    estimated = lines(tmp_path / "teacher_rewards.jsonl")
    by_id = {t.id: t for t in rl_tasks}
    tasks = [by_id[r["task_id"]] for r in estimated]  # in the order drawn: a batch's seeds follow it
    assert len(tasks) == 2
    model, tok = load_model("hf", path=str(sft_xs), dtype=ctx.dtype)
    rows = run_direct(tasks, HFEngine(model, tok, generation=rl.generation), tok, ctx.fmt, 2,
                      SamplingParams(max_new_tokens=48, temperature=rl.temperature, seed=ctx.seed), ctx.sim,
                      workers=ctx.workers, max_prompt_tokens=rl.max_prompt_tokens, batch_tasks=rl.prompts_per_generate,
                      progress=False)
    assert {r["task_id"]: r["reward"] for r in estimated} == mean_rewards(rows)
