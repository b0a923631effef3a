"""The checkpoint chosen on validation (rl.select_every) and the run's length in passes (rl.passes)."""
import json

import pytest
import torch
from safetensors.torch import load_file

from chorus.config.schema import RLConf
from chorus.rl.algos import get_algo
from chorus.rl.run import train_rl
from chorus.rl.selection import Selection, select_steps
from chorus.rl.task_sampler import rollout_steps
from helpers import context, lines, rl_settings, weights


def test_passes_count_rollouts_over_the_training_tasks():
    assert rollout_steps(RLConf(steps=7), 240) == 7  # no passes: rl.steps
    assert rollout_steps(RLConf(passes=1.0, prompts_per_step=8), 240) == 30
    assert rollout_steps(RLConf(passes=1.0, prompts_per_step=16), 177) == 12  # 11.06 rounded up: every task drawn
    assert rollout_steps(RLConf(passes=0.01, prompts_per_step=16), 10) == 1
    with pytest.raises(ValueError, match="rl.passes=0"):
        rollout_steps(RLConf(passes=0), 10)


def test_validation_points_are_the_init_every_k_steps_and_the_last():
    assert select_steps(RLConf(select_every=0), 30) == []
    assert select_steps(RLConf(select_every=10), 30) == [0, 10, 20, 30]
    assert select_steps(RLConf(select_every=8), 30) == [0, 8, 16, 24, 30]
    assert select_steps(RLConf(select_every=50), 3) == [0, 3]


def summary(p: float) -> dict:
    return {"pass_rate": p, "mean_overall": 50.0, "n_tasks": 10, "n_samples": 40}


def test_the_best_validation_pass_is_kept_the_earliest_of_equals_and_restored(tmp_path):
    model = torch.nn.Linear(2, 1)
    sel = Selection(tmp_path, [0, 1, 2, 3])
    states = {}
    for step, p in [(0, 0.40), (1, 0.55), (2, 0.55), (3, 0.50)]:
        with torch.no_grad():
            model.weight.fill_(float(step))
        states[step] = model.weight.clone()
        sel.record(step, summary(p), model)
    assert sel.best()["step"] == 1  # 0.55 at steps 1 and 2: the earlier
    assert json.loads((tmp_path / "select/best.json").read_text())["step"] == 1
    best = sel.restore(model)  # the model holds step 3's weights: step 1's come back
    assert best["step"] == 1 and torch.equal(model.weight, states[1])
    assert [r["step"] for r in lines(tmp_path / "selection.jsonl")] == [0, 1, 2, 3]
    # a resume from step 1 forgets the later points (they are made again)
    sel.trim(1)
    assert [r["step"] for r in sel.curve()] == [0, 1]


def test_a_last_step_best_leaves_the_weights_and_a_stale_keep_is_refused(tmp_path):
    model = torch.nn.Linear(2, 1)
    sel = Selection(tmp_path, [0, 1])
    sel.record(0, summary(0.1), model)
    with torch.no_grad():
        model.weight.fill_(3.0)
    sel.record(1, summary(0.2), model)
    with torch.no_grad():
        model.weight.fill_(5.0)  # not the recorded weights: restore must not touch the model
    assert sel.restore(model)["step"] == 1 and float(model.weight.detach()[0, 0]) == 5.0
    stale = Selection(tmp_path / "stale", [0, 1])
    stale.record(0, summary(0.3), model)
    stale.record(1, summary(0.5), model)
    stale.trim(0)  # the curve now ends at step 0, the kept weights are step 1's
    with pytest.raises(ValueError, match="keeps step 1, the curve's best is step 0; delete"):
        stale.restore(model)


def test_a_run_exports_and_evaluates_the_weights_chosen_on_validation(sft_xs, rl_tasks, eval_tasks, sim, tmp_path):
    """rl.select_every=1 over 2 steps: the init and both steps scored on the validation tasks; the
    exported policy is the best point's weights and summary.json says which step it was."""
    info = train_rl(str(sft_xs), get_algo("dapo"), rl_tasks, eval_tasks[:1], context(tmp_path, sim),
                    rl=rl_settings(select_every=1, select_samples=2, lr=5e-3), select_tasks=eval_tasks[1:3])
    curve = lines(tmp_path / "selection.jsonl")
    assert [r["step"] for r in curve] == [0, 1, 2] and all(r["tasks"] == 2 and r["samples"] == 4 for r in curve)
    want = min(curve, key=lambda r: (-r["pass_rate"], r["step"]))["step"]
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["selected_step"] == want == info["selected_step"]
    assert [r["step"] for r in saved["selection"]] == [0, 1, 2]
    exported, kept = weights(tmp_path / "hf"), load_file(str(tmp_path / "select/best.safetensors"))
    if want == 0:  # the init won: the export is the init's weights
        assert all(torch.equal(exported[k], v) for k, v in weights(sft_xs).items())
    for k, v in exported.items():
        assert torch.allclose(v.float(), kept[k].float()), k
    for step in (0, 1, 2):  # each point's own table, beside the run's held-out one
        assert (tmp_path / f"select/step_{step}/per_task.parquet").exists()


def test_a_run_with_passes_draws_every_training_task(sft_xs, rl_tasks, eval_tasks, sim, tmp_path):
    info = train_rl(str(sft_xs), get_algo("dapo"), rl_tasks[:5], eval_tasks[:1], context(tmp_path, sim),
                    rl=rl_settings(steps=99, passes=1.0, prompts_per_step=2, group_size=2))
    assert info["steps"] == 3  # ceil(5 / 2)
    drawn = {r["task_id"] for r in lines(tmp_path / "rollouts.jsonl")}
    assert drawn == {t.id for t in rl_tasks[:5]}


def test_validation_choice_is_refused_under_data_parallel_strategies_and_without_validation_tasks(sft_xs, rl_tasks,
                                                                                                  sim, tmp_path):
    from chorus.config.schema import TrainerConf
    from chorus.rl.run import check_run

    for strategy in ("ddp", "fsdp"):
        trainer = TrainerConf(strategy=strategy)
        with pytest.raises(ValueError, match=f"rl.select_every .* trainer={strategy} set rl.select_every=0"):
            check_run(get_algo("dapo"), RLConf(select_every=2, engine="vllm"), trainer)
    with pytest.raises(ValueError, match="rl.select_every chooses the checkpoint on validation tasks, and this run "
                                         "has none"):
        train_rl(str(sft_xs), get_algo("dapo"), rl_tasks, [], context(tmp_path, sim), rl=rl_settings(select_every=1))
