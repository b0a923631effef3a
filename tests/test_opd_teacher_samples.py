"""OPD's optional additions: teacher_samples (the routed teachers' own better answers as sequence-level
KD targets, beside the on-policy term), unrouted/routed rows under DAPO's group advantage, and the
gate's reference (hand values, real tiny runs)."""
import json
import shutil

import pytest
import torch

from chorus.config.schema import OPDConf, TeacherPoolConf
from chorus.opd.losses import pg_advantages, sequence_kd
from chorus.opd.teachers import Teacher
from chorus.rl.algos import OPD_ALGO
from chorus.rl.losses import clipped_pg_loss
from helpers import context, lines, rl_settings, weights


def test_sequence_kd_is_the_teacher_tokens_nll_over_the_steps_normaliser():
    logp = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.25, -4.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    # (2 + 3 + 0.5 + 0.25) / 4, the masked tokens left out
    assert float(sequence_kd(logp, mask, 4.0)) == pytest.approx(5.75 / 4)
    assert float(sequence_kd(logp, torch.zeros_like(mask), 4.0)) == 0.0


def _two_rows(tiny_xs, seed: int, first: int):
    """An OPDModule on the tiny student and two random rows whose completions start at `first`: the
    module, ids, attention, completion mask, the student's forward and its (detached) log-probs."""
    from chorus.opd.module import OPDModule
    from chorus.policy.models import load_model
    from chorus.rl.logprobs import forward_logprobs
    from chorus.rl.module import Hooks

    student, _ = load_model("hf", path=str(tiny_xs))
    torch.manual_seed(seed)
    ids = torch.randint(5, 200, (2, 6))
    attn, mask = torch.ones_like(ids), torch.zeros(2, 6)
    mask[:, first:] = 1.0
    module = OPDModule(student, OPD_ALGO, rl_settings(temperature=1.0), Hooks(rollout=lambda step: None), {})
    fwd = forward_logprobs(student, ids, attn, mask, 1.0)
    return module, ids, attn, mask, fwd, fwd.logp.detach()


def test_micro_loss_gives_student_rows_the_on_policy_term_and_teacher_rows_their_nll(tiny_xs):
    """Row 0 is the student's sample (pg advantage from the teacher's log-probs), row 1 a teacher's own
    sample: the loss is the pg loss over row 0 plus row 1's NLL, one normaliser; the
    teacher's log-probs stored for row 1 do not matter (a KD row is never scored by the teacher)."""
    from chorus.opd.rollouts import OPDBatch

    module, ids, attn, mask, fwd, old = _two_rows(tiny_xs, seed=0, first=3)
    t_logp = torch.full((2, 6), -3.0)
    results = []
    for other in (-3.0, 9.0):  # row 1's stored teacher log-probs: ignored
        t = t_logp.clone()
        t[1] = other
        batch = OPDBatch(ids, attn, mask, old, torch.zeros(2), rows=[{}, {}], teacher_logprobs=t,
                         teacher_of=["a", "a"], kd_rows=torch.tensor([False, True]))
        loss, _ = module.micro_loss(batch, slice(0, 2), ids, attn, mask, fwd, 6.0)
        results.append(float(loss.detach()))
    only0 = mask.clone()
    only0[1] = 0
    pg, _ = clipped_pg_loss(fwd.logp, old, pg_advantages(fwd.logp, t_logp) * only0, only0, OPD_ALGO.eps_low,
                            OPD_ALGO.eps_high, "token_mean", 6.0)
    nll = -float((fwd.logp[1] * mask[1]).sum()) / 6.0
    assert results[0] == pytest.approx(float(pg) + nll, rel=1e-5) and results[1] == results[0]
    # by hand at ratio 1: pg = -sum(adv) / 6 over row 0's three tokens, adv = t_logp - logp
    assert float(pg) == pytest.approx(-float(((-3.0 - old[0]) * mask[0]).sum()) / 6.0, rel=1e-5)


def _table(root, name, tasks, overall):  # an evaluation table in which the teacher passes every task
    (root / f"{name}_eval").mkdir()
    (root / f"{name}_eval/per_task.jsonl").write_text("".join(
        json.dumps({"task_id": t.id, "status": "ok", "overall": overall, "passed": True}) + "\n" for t in tasks))
    return str(root / f"{name}_eval")


class ScriptedTeacher:
    """A teacher's engine that answers each task's prompt with its design's strong program (which
    reaches the target) on even samples and an unfenced sentence on odd ones: what the keep rule
    must tell apart. Token ids are the real tokenizer's, so the student's update reads real rows."""
    streams_groups = False

    def __init__(self, tok, tasks):
        self.tok, self.tasks, self.calls = tok, tasks, 0

    def generate(self, prompts, n=1, params=None):
        from chorus.policy.engines import Generation

        self.calls += 1
        out = []
        for p in prompts:
            task = max((t for t in self.tasks if t.top in p), key=lambda t: len(t.top))
            texts = [f"filename: stimulus.vec\n```vectors\n{task.meta['programs']['strong']}```\n", "no idea"]
            group = []
            for i in range(n):
                ids = self.tok(texts[i % 2], add_special_tokens=False)["input_ids"]
                group.append(Generation(texts[i % 2], ids, [-0.5] * len(ids), "stop"))
            out.append(group)
        return out


def test_a_tiny_run_trains_on_the_routed_teachers_passing_samples(sft_xs, tiny_xs, rl_tasks, eval_tasks, sim,
                                                                  tmp_path, monkeypatch):
    """The untrained student (it passes nothing), one teacher whose table passes every task: each
    routed task gets 4 teacher samples, 2 passing and 2 not; the passing ones join the batch
    (rollouts.jsonl marks them kd_target, scored by the real simulator), and nothing else does; the
    teacher scores only the student's rows."""
    import chorus.opd.run as opd_run

    engines = []

    def scripted(rl):
        def make(model, tok):
            engines.append(ScriptedTeacher(tok, rl_tasks))
            return engines[-1]
        return make

    monkeypatch.setattr(opd_run, "teacher_engine", scripted)
    shutil.copytree(sft_xs, tmp_path / "teacher")
    pool = TeacherPoolConf(teachers=[Teacher("t", str(tmp_path / "teacher"), "table",
                                             _table(tmp_path, "t", rl_tasks, 100.0))])
    opd = OPDConf(teacher_samples=4)
    opd_run.train_opd(str(tiny_xs), pool, rl_tasks, eval_tasks[:1], context(tmp_path / "run", sim), opd=opd,
                      rl=rl_settings(steps=1, prompts_per_step=2, group_size=2))
    step = lines(tmp_path / "run/steps.jsonl")[0]
    routed = {d["task_id"] for d in lines(tmp_path / "run/decisions.jsonl") if d["teacher"]}
    rows = lines(tmp_path / "run/rollouts.jsonl")
    kd = [r for r in rows if r.get("kd_target")]
    assert len(routed) == 2 and len(engines) == 1 and step["kd_drawn"] == 8
    assert step["kd_kept"] == len(kd) == 4 and step["kd_tasks"] == 2
    assert all(r["passed"] and r["teacher"] == "t" for r in kd) and {r["task_id"] for r in kd} == routed
    assert [r.get("kd_target", False) for r in rows] == [False] * 4 + [True] * 4  # the student's rows first
    assert step["samples_trained"] == 8 and step["pass_rate"] == 0.0  # the student's own pass rate
    before, after = weights(tiny_xs), weights(tmp_path / "run/hf")
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_negative_teacher_samples_are_refused_in_one_line():
    with pytest.raises(ValueError, match="teacher_samples=-1 must be >= 0") as err:
        OPDConf(teacher_samples=-1)
    assert "\n" not in str(err.value)


def test_unrouted_tasks_take_dapos_group_advantage_with_its_overlong_penalty():
    from chorus.opd.rollouts import own_advantages
    from chorus.rl.algos import get_algo

    class Gen:
        def __init__(self, n):
            self.token_ids = [1] * n

    dapo = get_algo("dapo")  # overlong buffer 64: the last 64 tokens before 192 cost up to 1 point
    group = [{"reward": 1.0, "gen": Gen(100)}, {"reward": 1.0, "gen": Gen(160)}, {"reward": None, "gen": Gen(10)}]
    # 160 tokens: (160 - 128) / 64 = 0.5 into the buffer, penalty -0.5; rewards 1.0 and 0.5, mean 0.75, std 0.25
    got = own_advantages(group, dapo, 192)
    assert got[0] == pytest.approx(0.25 / (0.25 + 1e-6)) and got[1] == pytest.approx(-0.25 / (0.25 + 1e-6))
    assert got[2] == 0.0  # a harness error: no advantage


def test_micro_loss_gives_unrouted_rows_their_group_advantage(tiny_xs):
    from chorus.opd.rollouts import OPDBatch

    module, ids, attn, mask, fwd, old = _two_rows(tiny_xs, seed=1, first=2)
    t_logp = torch.full((2, 6), -2.0)
    batch = OPDBatch(ids, attn, mask, old, torch.tensor([0.0, 0.75]), rows=[{}, {}], teacher_logprobs=t_logp,
                     teacher_of=["a", None], kd_rows=torch.tensor([False, False]))
    loss, st = module.micro_loss(batch, slice(0, 2), ids, attn, mask, fwd, 8.0)
    # at ratio 1 the clipped loss is -sum(adv) / normaliser: row 0's teacher log-ratio, row 1's 0.75 per token
    want = -(float(((-2.0 - old[0]) * mask[0]).sum()) + 0.75 * 4) / 8.0
    assert float(loss.detach()) == pytest.approx(want, rel=1e-5)
    assert st["kl_sum"] == pytest.approx(float(((old[0] + 2.0) * mask[0]).sum()), rel=1e-5)  # row 0 only


def test_micro_loss_adds_the_group_advantage_to_a_routed_rows_teacher_signal(tiny_xs):
    """consolidation.routed=both: row 0 is routed (teacher "a" scores it) and carries its group
    advantage 0.5; row 1 is trained by its group advantage alone (an unrouted task's, unrouted=rl)."""
    from chorus.opd.rollouts import OPDBatch

    module, ids, attn, mask, fwd, old = _two_rows(tiny_xs, seed=2, first=3)
    batch = OPDBatch(ids, attn, mask, old, torch.tensor([0.5, -0.25]), rows=[{}, {}],
                     teacher_logprobs=torch.full((2, 6), -1.5), teacher_of=["a", None],
                     kd_rows=torch.tensor([False, False]))
    loss, _ = module.micro_loss(batch, slice(0, 2), ids, attn, mask, fwd, 6.0)
    # at ratio 1: -(sum over row 0's 3 tokens of (0.5 + (-1.5 - logp)) + 3 x -0.25) / 6
    want = -(float(((0.5 - 1.5 - old[0]) * mask[0]).sum()) - 0.25 * 3) / 6.0
    assert float(loss.detach()) == pytest.approx(want, rel=1e-5)


@pytest.mark.parametrize("routed", ["distil", "both"])
def test_routed_tasks_add_the_group_advantage_to_the_teachers_signal_only_with_both(
        routed, sft_xs, tiny_xs, rl_tasks, eval_tasks, sim, tmp_path, monkeypatch):
    """Every task is routed (the teacher's table passes all, the untrained student none), unrouted=rl.
    Either way every student row is kept and scored by the teacher (kl_t) and the teacher's passing
    samples join; with both each student row also carries its group advantage."""
    import chorus.opd.run as opd_run
    from chorus.core.modes import Routed, Unrouted

    monkeypatch.setattr(opd_run, "teacher_engine", lambda rl: lambda model, tok: ScriptedTeacher(tok, rl_tasks))
    shutil.copytree(sft_xs, tmp_path / "teacher")
    pool = TeacherPoolConf(teachers=[Teacher("t", str(tmp_path / "teacher"), "table",
                                             _table(tmp_path, "t", rl_tasks, 100.0))])
    opd = OPDConf(teacher_samples=2, unrouted=Unrouted.rl, routed=Routed(routed))
    opd_run.train_opd(str(tiny_xs), pool, rl_tasks, eval_tasks[:1], context(tmp_path / "run", sim), opd=opd,
                      rl=rl_settings(steps=1, prompts_per_step=2, group_size=2))
    step = lines(tmp_path / "run/steps.jsonl")[0]
    rows = lines(tmp_path / "run/rollouts.jsonl")
    own = [r for r in rows if not r.get("kd_target")]
    assert step["routed_fraction"] == 1.0 and step["kd_kept"] == 2 and len(rows) - len(own) == 2
    assert len(own) == 4 and "kl_t" in step and all(r["teacher"] == "t" for r in own)
    if routed == "both":
        assert all(r["advantage"] is not None for r in own) and step["rl_trained"] == len(own)
    else:  # the rollout row's advantage stays None: the teacher's signal alone
        assert all(r["advantage"] is None for r in own) and step["rl_trained"] == 0
    assert step["samples_trained"] == len(rows)


def test_routed_both_without_unrouted_rl_is_refused_in_one_line():
    from chorus.core.modes import Routed

    with pytest.raises(ValueError, match="routed=both .* set consolidation.unrouted=rl") as err:
        OPDConf(routed=Routed.both)
    assert "\n" not in str(err.value)


def test_the_gate_compares_teachers_with_the_better_of_the_student_and_its_reference(
        sft_xs, tiny_xs, rl_tasks, eval_tasks, sim, tmp_path):
    """consolidation.gate_reference: a teacher passing every task beats the untrained student (it passes
    none) everywhere, but not where the reference (what DAPO from the student reaches) passes too; a
    task the reference lacks is compared with the student's own value alone, and the run says how many."""
    from chorus.opd.run import train_opd

    shutil.copytree(sft_xs, tmp_path / "teacher")
    pool = TeacherPoolConf(teachers=[Teacher("t", str(tmp_path / "teacher"), "table",
                                             _table(tmp_path, "t", rl_tasks, 100.0))])
    (tmp_path / "ref").mkdir()
    reach = {t.id: i % 2 == 0 for i, t in enumerate(rl_tasks[1:])}  # rl_tasks[0] is not in the table
    (tmp_path / "ref/per_task.jsonl").write_text("".join(
        json.dumps({"task_id": k, "status": "ok", "overall": 100.0 if v else 10.0, "passed": v}) + "\n"
        for k, v in reach.items()))
    opd = OPDConf(gate_reference=str(tmp_path / "ref"))
    train_opd(str(tiny_xs), pool, rl_tasks, eval_tasks[:1], context(tmp_path / "run", sim), opd=opd,
              rl=rl_settings(steps=1, prompts_per_step=len(rl_tasks), group_size=2))
    decisions = lines(tmp_path / "run/decisions.jsonl")
    assert len(decisions) == len(rl_tasks) and all(d["student_reward"] == 0.0 for d in decisions)
    for d in decisions:
        reference = {True: 1.0, False: 0.0}.get(reach.get(d["task_id"]))
        assert d["reference_reward"] == reference
        assert (d["teacher"], d["reason"]) == ((None, "student_not_beaten") if reference == 1.0
                                               else ("t", "best_teacher_beats_student")), d
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    assert summary["gate_reference_lacks"] == 1 and summary["gate_reference"] == str(tmp_path / "ref")


@pytest.mark.parametrize("where, message", [("stage0", "names a stage: a pipeline wires it"),
                                            ("{tmp}/nowhere", "no reward table there; evaluate")])
def test_a_gate_reference_that_is_no_table_is_refused_in_one_line(where, message, tiny_xs, rl_tasks, sim, tmp_path):
    from chorus.opd.run import train_opd

    shutil.copytree(tiny_xs, tmp_path / "teacher")
    pool = TeacherPoolConf(teachers=[Teacher("t", str(tmp_path / "teacher"), "online")])
    with pytest.raises(ValueError, match=message) as err:
        train_opd(str(tiny_xs), pool, rl_tasks, [], context(tmp_path, sim),
                  opd=OPDConf(gate_reference=where.format(tmp=tmp_path)), rl=rl_settings())
    assert "\n" not in str(err.value)
