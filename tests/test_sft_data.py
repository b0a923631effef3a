"""SFT data: execution-validated examples, repair pairs, worst-state-prioritised sampling."""
from collections import Counter

import pytest

from chorus.policy.parsing import parse_completion
from chorus.sft.data import Example, answer, build_examples, own_repairs, prioritised_sample, score_samples, \
    task_weights
from chorus.sft.stages import mean_coverage
from chorus.tasks import load_tasks


def test_examples_are_validated_by_simulation_and_repairs_point_to_better_answers(sim_cfg):
    tasks = load_tasks("generated", per_family=1, families=["counter", "fsm"])
    examples = build_examples(tasks, "vectors", sim_cfg, min_coverage=80.0, workers=2)
    kinds = Counter((e.task_id, e.kind) for e in examples)
    for t in tasks:
        assert kinds[(t.id, "validated")] >= 1 and kinds[(t.id, "repair")] >= 1
    for e in examples:
        parsed = parse_completion(e.completion, "vectors")
        assert parsed.status == "ok" and parsed.filename == "stimulus.vec"
        if e.kind == "validated":
            assert e.coverage >= 80.0 and [m["role"] for m in e.messages] == ["system", "user"]
        else:  # a weaker real answer and its real feedback, then the verified best answer
            assert [m["role"] for m in e.messages] == ["system", "user", "assistant", "user"]
            assert e.meta["from_coverage"] < e.coverage and "Coverage of" in e.messages[-1]["content"]
    weak_grades = {e.meta["grade"] for e in examples if e.kind == "validated"}
    assert "weak" not in weak_grades  # the weak programs stay below 80 % and are not taught


def test_the_strategy_teacher_keeps_the_strategies_that_pass_each_task(sim_cfg):
    """sft_stage.strategies: every stimulus strategy of a mixed-world design is a candidate, and with
    min_coverage=None the bar is the task's own target, so the validated answers are exactly the
    strategies calibration found reaching it (meta["reaches"]); the others become repair pairs."""
    tasks = load_tasks("generated", per_family=6, families=["counter"], difficulty="mixed", split="train")
    examples = build_examples(tasks, "vectors", sim_cfg, min_coverage=None, workers=2, grades=(), strategies=True)
    taught = {(e.task_id, e.meta["grade"]) for e in examples if e.kind == "validated"}
    assert taught == {(t.id, f"strategy:{name}") for t in tasks for name in t.meta["reaches"]}
    assert {g for _, g in taught} == {"strategy:load_climb", "strategy:zero_climb"}
    for e in examples:
        target = next(t.target for t in tasks if t.id == e.task_id)
        assert e.coverage >= target
        if e.kind == "repair":  # a strategy that misses this design, its feedback, then one that passes
            assert e.meta["from_grade"].startswith("strategy:") and e.meta["from_coverage"] < target


def test_a_stage_given_skills_is_taught_only_their_strategies():
    """sft_stage.skills: a stage sees only the strategies of its skills (tasks.generated.SKILLS), so
    stages can learn different things; an unknown skill is refused in one line naming the known ones."""
    from chorus.sft.data import candidates, check_skills
    from chorus.sft.stages import keep_skills

    fsm = load_tasks("generated", per_family=6, families=["fsm"], difficulty="mixed", split="train")
    counter = load_tasks("generated", per_family=2, families=["counter"], difficulty="mixed", split="train")
    both = {g for t in fsm for g, _ in candidates(t, "vectors", (), True)}
    assert both == {"strategy:exact", "strategy:sweep"}
    assert {g for t in fsm for g, _ in candidates(t, "vectors", (), True, ["exact"])} == {"strategy:exact"}
    assert {g for t in fsm for g, _ in candidates(t, "vectors", (), True, ["sweep"])} == {"strategy:sweep"}
    assert all(not candidates(t, "vectors", (), True, ["exact", "sweep"]) for t in counter)  # counters only climb
    # grade programs are not strategies: a skill filter keeps them
    assert [g for g, _ in candidates(counter[0], "vectors", ("strong",), True, ["exact"])] == ["strong"]
    ex = [Example("a", "validated", [], "", 90.0, {"grade": "strategy:sweep"}),
          Example("a", "validated", [], "", 90.0, {"grade": "strategy:exact"}),
          Example("a", "repair", [], "", 90.0, {"from_grade": "strategy:sweep"})]
    assert [e.meta.get("grade") for e in keep_skills(ex, ["exact"])] == ["strategy:exact", None]
    assert keep_skills(ex, None) == ex
    with pytest.raises(ValueError, match=r"unknown skill\(s\) \['typing'\].*\['climb', 'exact', 'sweep'\]"):
        check_skills(["exact", "typing"])


def test_repairs_from_a_models_own_failures_carry_their_real_feedback(sim_cfg):
    """repair_from=own: a sampled answer that passes is left alone; one that fails, and one with no
    stimulus block, each become a repair pair: the sample as the assistant's turn, the feedback of its
    own simulation (or its parse failure), then the task's best validated answer."""
    task = load_tasks("generated", per_family=1, families=["counter"])[0]
    examples = build_examples([task], "vectors", sim_cfg, min_coverage=None, repair=False, workers=2)
    best = max((e for e in examples if e.kind == "validated"), key=lambda e: e.coverage)
    programs = task.meta["programs"]
    passing, failing = answer(task, "vectors", programs["strong"]), answer(task, "vectors", programs["weak"])
    garbled, empty = "stimulus: none here", ""  # read as unfenced vectors (which do not build), and nothing
    repairs = own_repairs([(task, passing), (task, failing), (task, garbled), (task, empty)], examples, "vectors",
                          sim_cfg, min_coverage=None, workers=2)
    assert [r.messages[-2]["content"] for r in repairs] == [failing, garbled, empty]
    weak, broken, bad = repairs
    assert broken.messages[-1]["content"].startswith("The stimulus did not produce coverage (compile_error)")
    assert "unknown alias 'stimulus'" in broken.messages[-1]["content"]
    assert all(r.kind == "repair" and r.completion == best.completion for r in repairs)
    assert weak.meta["from"] == "own" and weak.meta["from_coverage"] < task.target
    assert weak.messages[-1]["content"].startswith(f"Coverage of ") and f"(target {task.target:.0f}%)" in \
        weak.messages[-1]["content"]
    assert "no usable stimulus block" in bad.messages[-1]["content"] and bad.meta["from_coverage"] == 0.0
    assert own_repairs([(task, failing)], [], "vectors", sim_cfg) == []  # no validated answer: nothing to teach
    # a stage that also prioritises simulates its own samples once and reads both from those scores
    scored = score_samples([(task, passing), (task, failing), (task, garbled), (task, empty)], "vectors", sim_cfg)
    again = own_repairs([], examples, "vectors", sim_cfg, min_coverage=None, scored=scored)
    assert [(r.messages, r.meta) for r in again] == [(r.messages, r.meta) for r in repairs]
    covs = [row[-1] for row in scored]
    assert covs[0] >= task.target > covs[1] > 0 and covs[2:] == [0.0, 0.0]
    assert mean_coverage(scored, 2) == {task.id: pytest.approx((covs[0] + covs[1]) / 2)}  # the first two
    assert mean_coverage(scored, 9) == {task.id: pytest.approx(sum(covs) / 4)}  # all there are


def test_worst_state_weights_favour_low_coverage():
    w = task_weights({"easy": 100.0, "mid": 50.0, "hard": 0.0}, floor=0.05)
    assert w == pytest.approx({"easy": 0.05 / 1.55, "mid": 0.5 / 1.55, "hard": 1.0 / 1.55})


def test_prioritised_sampling_follows_the_weights_deterministically():
    examples = [Example(t, "validated", [], "x", 90.0) for t in ("a", "b")]
    draw = prioritised_sample(examples, {"a": 0.9, "b": 0.1}, k=2000, seed=3)
    assert draw == prioritised_sample(examples, {"a": 0.9, "b": 0.1}, k=2000, seed=3)
    share = Counter(e.task_id for e in draw)["a"] / 2000
    assert 0.86 < share < 0.94
    assert prioritised_sample(examples, {}, k=5) == []
