"""Lightning pass-through: trainer.extra (any Trainer argument, checked against Lightning's signature),
trainer.callbacks by _target_, and ckpt_path for RL."""
import json
import os
import subprocess
import sys

import pytest

from chorus.config.schema import TrainerConf
from chorus.trainer_setup import build_trainer, check_trainer
from helpers import PROMPT


@pytest.mark.parametrize("extra, callbacks, message", [
    ({"accumulate_grad_bathces": 4}, [], "trainer.extra.accumulate_grad_bathces is not an argument of Lightning's "
                                         "Trainer; did you mean trainer.extra.accumulate_grad_batches?"),
    ({"max_steps": 3}, [], "trainer.extra.max_steps: chorus sets it from rl.steps (sft_stage.steps for SFT); "
                           "set that instead"),
    ({"precision": "bf16-mixed"}, [], "chorus sets it from trainer.precision"),
    ({}, [{"monitor": "x"}], "trainer.callbacks.0 needs a _target_"),
    ({"offload": True}, [], "trainer.fsdp_cpu_offload=true needs trainer.strategy=fsdp (it is ddp)"),
])
def test_bad_trainer_settings_are_refused_in_one_line(extra, callbacks, message):
    settings = {"fsdp_cpu_offload": True, "strategy": "ddp"} if extra == {"offload": True} else {"extra": extra}
    with pytest.raises(ValueError) as err:
        check_trainer(TrainerConf(callbacks=callbacks, **settings))
    assert str(err.value).startswith("trainer.") and message in str(err.value) and "\n" not in str(err.value)


def test_extra_arguments_and_callbacks_reach_lightnings_trainer(tmp_path):
    from lightning.pytorch.callbacks import LearningRateMonitor

    fit = build_trainer(TrainerConf(extra={"accumulate_grad_batches": 4, "deterministic": True},
                                    callbacks=[{"_target_": "lightning.pytorch.callbacks.LearningRateMonitor",
                                                "logging_interval": "step"}]),
                        max_steps=7, callbacks=[], logger=False, default_root_dir=str(tmp_path))
    assert fit.accumulate_grad_batches == 4 and fit.max_steps == 7
    (monitor,) = [c for c in fit.callbacks if isinstance(c, LearningRateMonitor)]
    assert monitor.logging_interval == "step"
    with pytest.raises(ValueError, match=r"trainer.callbacks: cannot import lightning.pytorch.callbacks.Nope"):
        build_trainer(TrainerConf(callbacks=[{"_target_": "lightning.pytorch.callbacks.Nope"}]), max_steps=1, callbacks=[])


@pytest.mark.slow
def test_an_sft_stage_trains_with_extra_arguments_and_a_users_callback(tmp_path, cache_root):
    env = {**os.environ, "CHORUS_CACHE_DIR": str(cache_root)}
    saved = tmp_path / "mine"
    cmd = [sys.executable, "-m", "chorus.train", "job=sft", f"runs_dir={tmp_path}", "model=tiny", "model.size=xs",
           "format=vectors", "sft_stage.steps=2", "sft_stage.batch_size=2", "sft_stage.tasks.per_family=1",
           "sft_stage.tasks.families=[counter]", "sft_stage.evaluate=false", "logger=none",
           "+trainer.extra.accumulate_grad_batches=2",
           f"trainer.callbacks=[{{_target_: lightning.pytorch.callbacks.ModelCheckpoint, dirpath: '{saved}', "
           "every_n_train_steps: 1, save_top_k: -1}]", f"hydra.run.dir={tmp_path / 'h'}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    assert sorted(f.name.split("-")[1] for f in saved.glob("*.ckpt")) == ["step=1.ckpt", "step=2.ckpt"]
    (run,) = tmp_path.glob("sft/stage0-*")
    identity = json.loads((run / "run.json").read_text())["identity"]
    assert identity["trainer.extra.accumulate_grad_batches"] == 2  # it shapes the result: its own dir


@pytest.mark.slow
def test_rl_refuses_gradient_accumulation_in_one_line_and_starts_from_a_given_checkpoint(sft_xs, rl_tasks, sim,
                                                                                        tmp_path):
    from chorus.rl.algos import get_algo
    from chorus.rl.run import train_rl
    from helpers import context, lines, rl_settings

    common = ["job=rl", "sft_stage=stage1", f"sft_stage.checkpoint={sft_xs}", f"runs_dir={tmp_path}", "logger=none",
              "rl.steps=1", f"rl.max_prompt_tokens={PROMPT}", f"hydra.run.dir={tmp_path / 'h'}"]
    p = subprocess.run([sys.executable, "-m", "chorus.train", *common, "+trainer.extra.accumulate_grad_batches=2"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 2 and "chorus.train: error: Lightning refused the trainer settings:" in p.stderr
    assert "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, "-m", "chorus.train", *common, f"ckpt_path={tmp_path / 'none.ckpt'}"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 2 and f"ckpt_path={tmp_path / 'none.ckpt'} is not a file" in p.stderr

    algo = get_algo("dapo", overlong_buffer=32)
    first, second = tmp_path / "first", tmp_path / "second"
    train_rl(str(sft_xs), algo, rl_tasks, [], context(first, sim), rl=rl_settings(steps=1, max_new_tokens=32))
    info = train_rl(str(sft_xs), algo, rl_tasks, [], context(second, sim), rl=rl_settings(steps=2, max_new_tokens=32),
                    ckpt_path=str(first / "ckpt/last.ckpt"))
    assert info["resumed_from"] == str(first / "ckpt/last.ckpt") and info["steps"] == 2
    assert [s["step"] for s in lines(second / "steps.jsonl")] == [2]  # step 1 came with the checkpoint


@pytest.mark.parametrize("offload", [False, True])
def test_fsdp_is_chorus_fsdp2_strategy_with_the_offload_setting(offload):
    """trainer.strategy=fsdp builds chorus's FSDP2 strategy (not Lightning's FSDP1 of that name): pure
    data-parallel sharding, checkpoints in one file, CPU offload as trainer.fsdp_cpu_offload says."""
    from chorus.fsdp import FSDP2Strategy

    fit = build_trainer(TrainerConf(accelerator="cpu", devices=1, strategy="fsdp", fsdp_cpu_offload=offload),
                        max_steps=1, callbacks=[], logger=False)
    assert type(fit.strategy) is FSDP2Strategy and fit.strategy.cpu_offload is offload
    assert fit.strategy._save_distributed_checkpoint is False and fit.strategy._tensor_parallel_size == 1
