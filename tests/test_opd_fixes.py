"""OPD compares like with like: the direct divergences at the sampling temperature."""
import math

import pytest
import torch

from chorus.config_schema import ConsolidationConf
from chorus.modes import OPDMode
from chorus.opd.losses import generalized_jsd, reverse_kl
from chorus.opd.routing import route
from chorus.opd.teachers import Teacher
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
    from chorus.rl.losses import token_logprobs
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
            logits = student(input_ids=ids, attention_mask=attn).logits
            logp = token_logprobs(logits, ids, temp)[0]
            loss, _ = module.micro_loss(batch, slice(0, 2), ids, attn, mask, logits, logp, 8.0)
        # position k's distribution predicts token k+1: completion tokens 3..6 are scored at positions 2..5
        p_s, p_t = torch.softmax(z_s[:, 2:6] / temp, -1), torch.softmax(z_t[:, 2:6] / temp, -1)
        want = float((p_s * (p_s.log() - p_t.log())).sum()) / 8.0
        assert float(loss) == pytest.approx(want, rel=1e-4)
        losses[temp] = float(loss)
    assert abs(losses[0.5] - losses[1.0]) > 1e-3 * losses[1.0]  # so the check above can tell the two apart



def test_a_lead_of_rounding_size_is_no_lead():
    """Equal rewards summed in another order differ in the last bits (here 0.32 against 0.31999999999999995),
    and tables round coverage to 1e-4 % (1e-6 of reward): neither makes a teacher better."""
    teacher, student = (0.8 + 1.2 - 0.5 - 0.2 + 0.3) / 5, (0.3 - 0.2 + 1.2 - 0.5 + 0.8) / 5
    assert teacher != student  # the float sums really differ
    assert route({"a": teacher}, student).reason == "student_not_beaten"
    assert route({"a": student + 4e-7}, student).reason == "student_not_beaten"
    assert route({"a": student + 2e-6}, student).reason == "best_teacher_beats_student"

