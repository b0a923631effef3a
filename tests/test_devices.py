"""Every job on its device (issue 15): CPU-only checks of the device and thread choices a GPU run makes."""
import lightning as L
import pytest
import torch
from omegaconf import OmegaConf

from chorus.config.schema import Teacher, TrainerConf
from chorus.opd import rollouts as opd_rollouts
from chorus.opd.rollouts import TeacherModels
from chorus.policy import engines
from chorus.policy.engines import HFEngine, generation_threads
from chorus.rl import run as rl_run
from chorus.rl.algos import get_algo
from chorus.rl.run import train_rl
from chorus import heldout, trainer_setup
from chorus.trainer_setup import eval_device
from chorus.sft import run as sft_run
from helpers import context, rl_settings


@pytest.mark.parametrize("device, threads, expected", [
    ("cpu", 1, 1), (torch.device("cpu"), 4, 4), ("cpu", None, None),
    ("cuda", 1, None), (torch.device("cuda", 3), 1, None), ("meta", 1, None), ("mps", 1, None)])
def test_generation_threads_are_set_only_for_cpu_generation(device, threads, expected):
    assert generation_threads(device, threads) == expected


@pytest.mark.parametrize("device, calls", [("cpu", [1]), ("meta", [])])
def test_hf_engine_leaves_torch_threads_alone_off_the_cpu(device, calls, monkeypatch):
    seen = []
    monkeypatch.setattr(engines.torch, "set_num_threads", seen.append)
    monkeypatch.setattr(engines.torch, "get_num_threads", lambda: 2)
    engine = HFEngine(torch.nn.Linear(2, 2).to(device), tokenizer=None, threads=1)
    assert seen == calls
    # the device is read again when generating: a model the trainer moved keeps its threads choice
    engine.model = torch.nn.Linear(2, 2)
    engine._apply_threads()
    assert seen == calls + [1]


@pytest.mark.parametrize("accelerator, devices, cuda, expected", [
    ("cpu", 1, True, "cpu"), ("cpu", 2, False, "cpu"), ("auto", 1, False, "cpu"),
    ("auto", 1, True, "cuda:0"), ("gpu", 1, False, "cuda:0"), ("cuda", 4, True, "cuda:0"),
    ("gpu", [2, 3], True, "cuda:2"), ("gpu", "1,3", True, "cuda:1"), ("gpu", "2,", True, "cuda:2"),
    ("gpu", "auto", True, "cuda:0"), ("gpu", -1, True, "cuda:0"), ("mps", 1, False, "cpu")])
def test_eval_device_is_where_rank_zero_trains(accelerator, devices, cuda, expected):
    conf = TrainerConf(accelerator=accelerator, devices=devices)
    assert eval_device(conf, cuda_available=cuda) == torch.device(expected)


def test_eval_device_reads_a_composed_device_list():
    conf = OmegaConf.structured(TrainerConf(accelerator="gpu", devices=[1, 2]))
    assert eval_device(conf, cuda_available=True) == torch.device("cuda", 1)


def test_the_final_evaluation_runs_on_eval_device_after_teardown(sft_xs, rl_tasks, eval_tasks, sim, tmp_path,
                                                                   monkeypatch):
    """Lightning's teardown leaves the policy on the CPU; train_rl moves it to eval_device before evaluating
    (here a meta device stands in for the GPU)."""
    asked, evaluated_on = [], []
    for module in (rl_run, trainer_setup):  # train_rl's, and use_gradient_checkpointing's (trainer_setup)
        monkeypatch.setattr(module, "eval_device", lambda trainer: asked.append(trainer) or torch.device("meta"))

    def fake_evaluate(engine, tok, tasks, rl, ctx, **kw):
        evaluated_on.append(next(engine.model.parameters()).device)
        return {"pass_rate": 0.0, "mean_overall": 0.0}
    monkeypatch.setattr(rl_run, "evaluate_policy", fake_evaluate)
    trainer = TrainerConf()
    train_rl(str(sft_xs), get_algo("dapo", overlong_buffer=32), rl_tasks, eval_tasks, context(tmp_path, sim),
             rl=rl_settings(steps=1, eval_every=0), trainer=trainer)
    # asked five times: whether to sample from an inference copy, whether to checkpoint activations and
    # whether AdamW is fused (when the trainer's settings are checked, then for the module; all three
    # only on a GPU by default), then where to evaluate
    assert asked == [trainer] * 5 and evaluated_on == [torch.device("meta")]


class _Recorder:
    def __init__(self):
        self.devices = []

    def __call__(self, kind, path=None, dtype="float32", device="cpu", **_):
        self.devices.append((path, torch.device(device)))
        return torch.nn.Linear(2, 2).to(device), None


@pytest.mark.parametrize("keep", [True, False])
def test_teachers_load_on_and_move_to_the_students_device(keep, monkeypatch):
    load = _Recorder()
    monkeypatch.setattr(opd_rollouts, "load_model", load)
    models = TeacherModels([Teacher("a", "/a"), Teacher("b", "/b")], keep_in_memory=keep)
    with models.use("a") as a:
        assert a.weight.device.type == "cpu"
    models.to(torch.device("meta"))  # what OPDModule.on_fit_start does with the student's device
    assert all(m.weight.device.type == "meta" for m in models.loaded.values())
    with models.use("b") as b:
        assert b.weight.device.type == "meta"
    assert load.devices == [("/a", torch.device("cpu")), ("/b", torch.device("meta"))]
    assert models.device == torch.device("meta") and (set(models.loaded) == ({"a", "b"} if keep else set()))


def test_opd_module_puts_the_teachers_on_its_device():
    from chorus.opd.module import OPDModule

    class Pool:
        device = None

        def to(self, device):
            self.device = device

    module = OPDModule.__new__(OPDModule)
    L.LightningModule.__init__(module)
    module.teachers = Pool()
    module.on_fit_start()
    assert module.teachers.device == module.device == torch.device("cpu")


def test_sft_builds_its_lightning_trainer_from_the_trainer_settings(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr(sft_run.L, "Trainer", lambda **kw: seen.update(kw) or "trainer")
    conf = TrainerConf(name="gpu", accelerator="gpu", devices=[1], num_nodes=2, strategy="ddp",
                       precision="bf16-mixed")
    assert sft_run.sft_trainer(conf, steps=5, grad_clip=0.5, out_dir=tmp_path) == "trainer"
    assert {k: seen[k] for k in ("accelerator", "devices", "num_nodes", "strategy", "precision", "max_steps",
                                 "gradient_clip_val")} == {"accelerator": "gpu", "devices": [1], "num_nodes": 2,
                                                           "strategy": "ddp", "precision": "bf16-mixed",
                                                           "max_steps": 5, "gradient_clip_val": 0.5}


def test_sft_trainer_on_the_cpu_takes_the_precision(tmp_path):
    fit = sft_run.sft_trainer(TrainerConf(precision="bf16-mixed"), steps=1, grad_clip=1.0, out_dir=tmp_path)
    assert type(fit.accelerator).__name__ == "CPUAccelerator" and fit.precision == "bf16-mixed"
    assert sft_run.sft_trainer(TrainerConf(), 1, 1.0, tmp_path).precision == "32-true"


@pytest.mark.parametrize("precision, autocast, weights, dtype", [("32-true", None, torch.float32, "float32"),
                                                                  ("bf16-mixed", torch.bfloat16, torch.float32,
                                                                   "float32"),
                                                                  ("bf16-true", None, torch.bfloat16, "float32"),
                                                                  # model.dtype: float32 still on the CPU
                                                                  ("32-true", None, torch.float32, "bfloat16")])
def test_checkpoint_evaluations_run_as_the_trainer_computes(sft_xs, eval_tasks, sim, tmp_path, monkeypatch,
                                                             precision, autocast, weights, dtype):
    """SFT stages and merges are scored by evaluate_checkpoint: on eval_device(trainer) and under
    trainer.precision's plugin, as a trained expert's final evaluation runs inside fit (it used to load
    on the CPU in float32 whatever the trainer said)."""
    seen = {}
    monkeypatch.setattr(heldout, "eval_device", lambda trainer: seen.setdefault("trainer", trainer) and
                        torch.device("cpu"))

    def fake_evaluate(engine, tok, tasks, rl, ctx, **kw):
        on = torch.is_autocast_enabled("cpu")
        seen.update(autocast=torch.get_autocast_dtype("cpu") if on else None,
                    weights=next(engine.model.parameters()).dtype)
        return {"pass_rate": 0.0, "mean_overall": 0.0}
    monkeypatch.setattr(heldout, "evaluate_policy", fake_evaluate)
    trainer = TrainerConf(precision=precision)
    heldout.evaluate_checkpoint(str(sft_xs), eval_tasks, rl_settings(), context(tmp_path, sim, dtype=dtype),
                                trainer=trainer)
    assert seen == {"trainer": trainer, "autocast": autocast, "weights": weights}
    assert not torch.is_autocast_enabled("cpu")  # the context ends with the evaluation


@pytest.mark.parametrize("model_dtype, device, expected", [
    ("bfloat16", torch.device("cuda", 0), "bfloat16"),  # bf16 weights read as they are, as RL's inference copy
    ("float16", torch.device("cuda", 1), "float16"),
    ("float32", torch.device("cuda", 0), "float32"),
    ("bfloat16", torch.device("cpu"), "float32"),  # the CPU: float32, as a policy trained there is evaluated
    ("float32", torch.device("cpu"), "float32"),
])
def test_checkpoints_are_evaluated_in_model_dtype_on_a_gpu_and_float32_on_the_cpu(model_dtype, device, expected):
    assert heldout.evaluation_dtype(model_dtype, device) == expected
    # trainer.eval_in_model_dtype: a GPU's choice on any device, or float32 on a GPU
    assert heldout.evaluation_dtype(model_dtype, device, True) == model_dtype
    assert heldout.evaluation_dtype(model_dtype, device, False) == "float32"


def test_merges_are_evaluated_on_the_trainer(monkeypatch, tmp_path):
    from chorus.config.schema import MergeConf, TeacherPoolConf
    from chorus.merge import run as merge_run

    seen = {}
    monkeypatch.setattr(merge_run, "merge_checkpoints", lambda *a, **kw: {"checkpoint": "merged"})
    monkeypatch.setattr(merge_run, "evaluate_checkpoint", lambda *a, **kw: seen.update(kw) or {})
    trainer = TrainerConf(accelerator="gpu", precision="bf16-mixed")
    pool = TeacherPoolConf(teachers=[Teacher(name="a", checkpoint="a"), Teacher(name="b", checkpoint="b")])
    merge_run.merge_and_evaluate(MergeConf(name="soup"), pool, [], rl_settings(),
                                 context(tmp_path, None), trainer=trainer)
    assert seen["trainer"] is trainer
