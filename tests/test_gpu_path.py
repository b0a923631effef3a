"""What a GPU run does differently, run on the CPU through Lightning's real loop under bf16-mixed.

No behaviour is chosen by CUDA alone: each is a setting whose null means "as on a GPU" (trainer.
fused_optimizer, gradient_checkpointing, pack_sequences; rl.inference_copy, rl.generation; model.dtype
for evaluations), and here each is forced on. The failure this guards against: AdamW was fused on CUDA
only, and Lightning 2.6 refuses `clip_gradients` for a fused optimizer under bf16-mixed, so every GPU
run of SFT, RL and OPD would have crashed at its first clip while the CPU suite passed.
"""
import json

import lightning as L
import pytest
import torch

from chorus import optimizer
from chorus.config.schema import OPDConf, TeacherPoolConf, TrainerConf
from chorus.opd.run import train_opd
from chorus.rl import module as rl_module
from chorus.rl.algos import get_algo
from chorus.rl.run import train_rl
from chorus.sft import module as sft_module
from chorus.sft.data import build_examples
from chorus.sft.run import train_sft
from chorus.trainer_setup import check_trainer, fused_optimizer
from helpers import context, lines, rl_settings, weights

# every GPU behaviour a trainer setting chooses, on the CPU
GPU_ON_CPU = TrainerConf(precision="bf16-mixed", fused_optimizer=True, gradient_checkpointing=True,
                         pack_sequences=True)
CLIP = 1e-3  # far below the tiny model's gradient norms (~1-10): every step's clip binds


def _total_norm(opt) -> float:
    grads = [p.grad for g in opt.param_groups for p in g["params"] if p.grad is not None]
    return float(torch.linalg.vector_norm(torch.stack([g.float().norm() for g in grads]))) if grads else 0.0


@pytest.fixture
def steps_seen(monkeypatch):
    """Each AdamW the trainers build: whether it is fused, and the gradient norm at each of its steps
    (after the clip, before the update)."""
    seen = []

    def spy(params, lr, weight_decay, fused):
        opt = optimizer.adamw(params, lr, weight_decay, fused)
        record = {"fused": opt.defaults["fused"], "norms": []}
        opt.register_step_pre_hook(lambda o, args, kwargs: record["norms"].append(_total_norm(o)))
        seen.append(record)
        return opt

    monkeypatch.setattr(rl_module, "adamw", spy)
    monkeypatch.setattr(sft_module, "adamw", spy)
    return seen


def _clipped_everywhere(seen) -> None:
    norms = [n for r in seen for n in r["norms"] if n > 0]
    assert seen and all(r["fused"] for r in seen) and norms
    assert norms == pytest.approx([CLIP] * len(norms), rel=1e-3)  # clipped to exactly CLIP: the clip acted


class _Linear(L.LightningModule):
    """A linear layer whose gradient norm is known: loss = w . x with w, x in R^4, so d loss / d w = x."""

    def __init__(self, manual: bool):
        super().__init__()
        self.lin = torch.nn.Linear(4, 1, bias=False)
        self.automatic_optimization = not manual
        self.norms = []

    def training_step(self, batch, _):
        loss = self.lin(batch[0]).sum()
        if self.automatic_optimization:
            return loss
        opt = self.optimizers()
        opt.zero_grad()
        self.manual_backward(loss)
        optimizer.clip_grad_norm(self, opt, 1.0)
        self.norms.append(_total_norm(opt.optimizer))
        opt.step()

    def configure_gradient_clipping(self, opt, gradient_clip_val=None, gradient_clip_algorithm=None):
        optimizer.clip_grad_norm(self, opt, gradient_clip_val or 0.0)
        self.norms.append(_total_norm(opt))

    def configure_optimizers(self):
        return optimizer.adamw(self.parameters(), 1e-3, 0.0, fused=True)


@pytest.mark.parametrize("manual", [True, False])
def test_a_fused_adamw_clips_under_bf16_mixed_in_lightnings_loop(manual):
    """x = (3, 4, 0, 0) in a batch of one: the gradient is x, norm 5, clipped to 1 (by hand), where
    Lightning's own clip raises for the fused optimizer."""
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.tensor([[3.0, 4.0, 0.0, 0.0]])))
    module = _Linear(manual)
    trainer = L.Trainer(accelerator="cpu", precision="bf16-mixed", max_steps=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        **({} if manual else {"gradient_clip_val": 1.0}))
    trainer.fit(module, data)
    assert module.norms == pytest.approx([1.0], rel=1e-6)
    assert trainer.optimizers[0].defaults["fused"] is True


def test_the_fused_setting_resolves_as_on_a_gpu_and_is_refused_where_it_cannot_run(monkeypatch):
    assert fused_optimizer(TrainerConf()) is False  # null on the CPU: foreach
    assert fused_optimizer(TrainerConf(fused_optimizer=True)) is True  # torch has the CPU kernel
    monkeypatch.setattr("chorus.trainer_setup.eval_device", lambda t: torch.device("cuda", 0))
    assert fused_optimizer(TrainerConf(precision="bf16-mixed")) is True  # null where training runs on a GPU
    assert fused_optimizer(TrainerConf(precision="16-mixed")) is False  # the scaler keeps foreach
    with pytest.raises(ValueError, match=r"fused_optimizer=true under trainer.precision=16-mixed.*bf16-mixed"):
        check_trainer(TrainerConf(precision="16-mixed", fused_optimizer=True))
    monkeypatch.setattr(optimizer, "fused_devices", lambda: ["mps"])
    with pytest.raises(ValueError, match=r"no fused AdamW for cuda; set trainer.fused_optimizer=false") as err:
        check_trainer(TrainerConf(fused_optimizer=True))
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_sft_on_the_gpu_path(steps_seen, tiny_xs, rl_tasks, sim, tmp_path):
    examples = build_examples(rl_tasks[:2], "vectors", sim, 50.0, repair=False, workers=2)
    out = train_sft(str(tiny_xs), examples, tmp_path, steps=2, batch_size=2, grad_clip=CLIP, warmup_steps=1,
                    trainer=GPU_ON_CPU)
    assert len(out["losses"]) == 2 and all(torch.isfinite(torch.tensor(out["losses"])))
    _clipped_everywhere(steps_seen)
    assert len(steps_seen[0]["norms"]) == 2


@pytest.mark.slow
def test_rl_on_the_gpu_path(steps_seen, sft_xs, rl_tasks, sim, tmp_path):
    """DAPO with the fused optimizer, clipping, activation checkpointing, packed passes, a bf16 inference
    copy sampling with a static cache, evaluated in model.dtype: it trains and exports fp32 masters."""
    train_rl(str(sft_xs), get_algo("dapo", overlong_buffer=32), rl_tasks, rl_tasks[:1],
                    context(tmp_path, sim, dtype="bfloat16"),
                    rl=rl_settings(steps=1, grad_clip=CLIP, inference_copy="on", generation="static"),
                    trainer=GPU_ON_CPU)
    _clipped_everywhere(steps_seen)
    step = lines(tmp_path / "steps.jsonl")[0]
    assert step["optimizer_steps"] >= 1 and step["update_skipped"] == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["n_samples"] == 1 and (tmp_path / "per_task.parquet").exists()
    before, after = weights(sft_xs), weights(tmp_path / "hf")
    assert {v.dtype for v in after.values()} == {torch.float32}
    assert any(not torch.equal(before[k], after[k]) for k in before)


@pytest.mark.slow
def test_opd_on_the_gpu_path(steps_seen, sft_xs, tiny_xs, rl_tasks, sim, tmp_path):
    """OPD routes to a teacher that beats the student and distils under the same GPU settings."""
    import shutil

    from chorus.config.schema import Teacher

    shutil.copytree(sft_xs, tmp_path / "teacher")
    (tmp_path / "teacher_eval").mkdir()
    (tmp_path / "teacher_eval/per_task.jsonl").write_text("".join(
        f'{{"task_id": "{t.id}", "status": "ok", "overall": 100.0, "passed": true}}\n' for t in rl_tasks))
    pool = TeacherPoolConf(teachers=[Teacher("good", str(tmp_path / "teacher"), "table", str(tmp_path / "teacher_eval"))])
    train_opd(str(tiny_xs), pool, rl_tasks, rl_tasks[:1], context(tmp_path / "run", sim, dtype="bfloat16"),
              opd=OPDConf(),
              rl=rl_settings(steps=1, prompts_per_step=2, group_size=2, grad_clip=CLIP), trainer=GPU_ON_CPU)
    assert {d["teacher"] for d in lines(tmp_path / "run/decisions.jsonl")} == {"good"}
    _clipped_everywhere(steps_seen)


@pytest.mark.slow
def test_a_checkpoint_is_evaluated_as_on_a_gpu(sft_xs, rl_tasks, sim, tmp_path, monkeypatch):
    """SFT stages and merges are scored by evaluate_checkpoint: with trainer.eval_in_model_dtype=true
    the weights are model.dtype's (bf16) under bf16-mixed, as on a GPU, sampled with a static cache."""
    from chorus import heldout

    loaded = []
    load = heldout.load_model
    monkeypatch.setattr(heldout, "load_model", lambda *a, **k: loaded.append(load(*a, **k)) or loaded[-1])
    summary = heldout.evaluate_checkpoint(str(sft_xs), rl_tasks[:1], rl_settings(generation="static"),
                                          context(tmp_path, sim, dtype="bfloat16"),
                                          trainer=TrainerConf(precision="bf16-mixed", eval_in_model_dtype=True))
    assert {p.dtype for p in loaded[0][0].parameters()} == {torch.bfloat16}
    assert summary["n_samples"] == 1 and (tmp_path / "per_task.parquet").exists()
