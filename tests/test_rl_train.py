"""Tiny RL runs end to end: real Verilator rewards, a real (tiny) transformers policy, Lightning."""
import json
import re

import pandas as pd
import pytest
import torch

from chorus.config.schema import LoraConf
from chorus.rl.algos import get_algo
from chorus.rl.rollouts import collect
from chorus.rl.run import Objective, train_rl
from chorus.tracking.progress import Progress
from chorus.tracking.record import machine_kind
from helpers import PROMPT, context, lines, rl_settings, weights
from wandb_records import final_summary, records


def run(init, out, name="dapo", eval_tasks=(), rl_tasks=(), sim=None, algo=None, objective=Objective(),
        progress=None, meta=None, **over):
    a = get_algo(name, overlong_buffer=over.pop("overlong_buffer", 32), **(algo or {}))
    ctx = context(out, sim, **({"progress": progress} if progress else {}), **({"meta": meta} if meta else {}))
    return train_rl(str(init), a, rl_tasks, eval_tasks, ctx, rl=rl_settings(**over), objective=objective)


def test_tiny_dapo_run_changes_every_trainable_parameter_and_writes_per_task_coverage(
        sft_xs, rl_tasks, eval_tasks, sim, tmp_path):
    info = run(sft_xs, tmp_path, eval_every=1, rl_tasks=rl_tasks, eval_tasks=eval_tasks, sim=sim,
               progress=Progress(tmp_path), meta={"pass_coverage": 0.0})
    before, after = weights(sft_xs), weights(tmp_path / "hf")
    assert before.keys() == after.keys()
    unchanged = [k for k in before if torch.equal(before[k], after[k])]
    assert unchanged == []
    steps = lines(tmp_path / "steps.jsonl")
    assert [s["step"] for s in steps] == [1, 2] and info["steps"] == 2
    for s in steps:  # the step scalars the issue asks for, with sane values
        assert -1.2 <= s["reward_mean"] <= 1 and s["reward_std"] >= 0 and 0 <= s["compile_rate"] <= 1
        assert 0 <= s["zero_std_fraction"] <= 1 and 0 <= s["truncated_fraction"] <= 1 and s["entropy"] > 0
        assert s["clip_frac_low"] >= 0 and s["clip_frac_high"] >= 0 and 0 < s["distinct_ratio"] <= 1
        assert s["generation_s"] > 0 and s["update_s"] > 0 and s["completion_len_mean"] > 0
    assert any(s["update_skipped"] == 0 for s in steps)
    rollouts = lines(tmp_path / "rollouts.jsonl")
    assert {r["step"] for r in rollouts} == {1, 2} and all("advantage" in r and "text" in r for r in rollouts)
    table = pd.read_parquet(tmp_path / "per_task.parquet")
    assert sorted(table["task_id"]) == sorted(t.id for t in eval_tasks)
    assert set(table["status"]) <= {"ok", "compile_error", "empty", "runtime_error", "rejected", "timeout"}
    periodic = pd.read_parquet(tmp_path / "eval/step_1/per_task.parquet")  # eval_every=1; the last is the final
    assert len(periodic) == 3 and not (tmp_path / "eval/step_2").exists()
    # both evaluations score under the run's pass rule (at >= 0 % coverage every sample passes)
    for where in (tmp_path / "eval/step_1", tmp_path):
        scored = json.loads((where / "summary.json").read_text())
        assert scored["pass_coverage"] == 0.0 and scored["pass_rate"] == 1.0
    assert list(pd.read_csv(next((tmp_path / "lightning").rglob("metrics.csv")))["train/reward_mean"].dropna())
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["n_tasks"] == 3 and summary["steps"] == 2 and summary["init"] == str(sft_xs)
    # both held-out evaluations report progress, from 0 to every sample generated
    progress = lines(tmp_path / "progress.jsonl")
    for phase in ("held-out evaluation at step 1", "held-out evaluation"):
        done = [(p["done"], p["total"]) for p in progress if p["phase"] == phase]
        assert done[0] == (0, 3) and done[-1] == (3, 3), phase


def test_killed_run_resumes_to_the_straight_runs_step_data_position_and_weights(
        sft_xs, rl_tasks, eval_tasks, sim, tmp_path):
    straight = run(sft_xs, tmp_path / "straight", steps=3, rl_tasks=rl_tasks, eval_tasks=eval_tasks[:1], sim=sim)

    calls, resume_points = [], []
    ckpt = tmp_path / "killed/ckpt"

    def dies_on_the_third_rollout(*a, **k):
        calls.append(1)
        last = ckpt / "last.ckpt"
        resume_points.append(torch.load(last, weights_only=False)["global_step"] if last.exists() else None)
        if len(calls) == 3:
            raise RuntimeError("killed")
        return collect(*a, **k)

    with pytest.raises(RuntimeError, match="killed"):
        run(sft_xs, tmp_path / "killed", steps=3, rl_tasks=rl_tasks, eval_tasks=eval_tasks[:1], sim=sim,
            resume_every=2, objective=Objective(collect=dies_on_the_third_rollout))
    # a weights-only snapshot after every step (save_every=1), the resume point after every second only
    assert resume_points == [None, None, 2] and not (tmp_path / "killed/hf").exists()
    assert sorted(p.name for p in ckpt.glob("*.ckpt")) == ["last.ckpt", "weights-step=1.ckpt", "weights-step=2.ckpt"]
    last, snap = (torch.load(ckpt / f, weights_only=False) for f in ("last.ckpt", "weights-step=2.ckpt"))
    assert last["optimizer_states"][0]["state"][0]["exp_avg"].shape and last["lr_schedulers"]
    assert "optimizer_states" not in snap and "lr_schedulers" not in snap and snap["global_step"] == 2
    assert snap["state_dict"].keys() == last["state_dict"].keys()
    assert all(torch.equal(snap["state_dict"][k], v) for k, v in last["state_dict"].items())  # step 2's weights
    with pytest.raises(ValueError, match="holds weights only.*ckpt/last.ckpt"):  # a snapshot cannot resume
        train_rl(str(sft_xs), get_algo("dapo"), rl_tasks, [], context(tmp_path / "other", sim), rl=rl_settings(),
                 ckpt_path=str(ckpt / "weights-step=1.ckpt"))
    resumed = run(sft_xs, tmp_path / "killed", steps=3, rl_tasks=rl_tasks, eval_tasks=eval_tasks[:1], sim=sim)

    assert resumed["resumed_from"].endswith("last.ckpt") and resumed["steps"] == straight["steps"] == 3
    assert resumed["data_position"] == straight["data_position"]
    a, b = lines(tmp_path / "straight/steps.jsonl"), lines(tmp_path / "killed/steps.jsonl")
    assert [s["step"] for s in b] == [1, 2, 3]
    # same tasks, same samples, same rewards at the step after the resume, and the same final weights
    assert [(s["reward_mean"], s["samples"]) for s in a] == [(s["reward_mean"], s["samples"]) for s in b]
    w1, w2 = weights(tmp_path / "straight/hf"), weights(tmp_path / "killed/hf")
    assert all(torch.allclose(w1[k], w2[k], atol=1e-6) for k in w1)
    # the straight run: one snapshot per step, the last one the exported policy, and the resume point
    # written at the end of fit (rl.resume_every=20 never came)
    names = sorted(p.name for p in (tmp_path / "straight/ckpt").glob("*.ckpt"))
    assert names == ["last.ckpt", "weights-step=1.ckpt", "weights-step=2.ckpt", "weights-step=3.ckpt"]
    step3 = torch.load(tmp_path / "straight/ckpt/weights-step=3.ckpt", weights_only=False)["state_dict"]
    assert all(torch.equal(step3[f"model.{k}"], v) for k, v in w1.items())


def test_resuming_with_a_different_model_names_the_fix(sft_xs, tiny_xs, rl_tasks, sim, tmp_path):
    run(sft_xs, tmp_path, steps=1, rl_tasks=rl_tasks, eval_tasks=[], sim=sim)
    with pytest.raises(ValueError, match="resume with the same model.*rl.resume=false"):
        run(tiny_xs, tmp_path, steps=2, rl_tasks=rl_tasks, eval_tasks=[], sim=sim)


def test_grpo_with_lora_and_k3_kl_trains_only_the_adapter(sft_xs, rl_tasks, sim, tmp_path):
    run(sft_xs, tmp_path, "grpo", steps=1, overlong_buffer=96, algo={"kl_coef": 0.1},
        lora=LoraConf(r=4, alpha=8), rl_tasks=rl_tasks, eval_tasks=[], sim=sim)
    before, after = weights(sft_xs), weights(tmp_path / "hf")
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(any(m in k for m in ("q_proj", "k_proj", "v_proj", "o_proj")) for k in changed)
    step = lines(tmp_path / "steps.jsonl")[0]
    assert step["kl"] >= 0 and step["update_skipped"] == 0


def test_negative_checkpoint_intervals_name_the_fix():
    from chorus.config.schema import RLConf, TrainerConf
    from chorus.rl.run import check_run

    for key in ("save_every", "resume_every"):
        with pytest.raises(ValueError, match=f"rl.{key}=-1 is negative; use a step count, or 0"):
            check_run(get_algo("dapo"), RLConf(**{key: -1}), TrainerConf())
    check_run(get_algo("dapo"), RLConf(save_every=0, resume_every=0), TrainerConf())  # 0: never, accepted


def test_group_of_one_with_a_std_normalised_advantage_names_the_fix(sft_xs, rl_tasks, sim, tmp_path):
    with pytest.raises(ValueError, match="group_size >= 2 or rl_algo=dr_grpo"):
        run(sft_xs, tmp_path, group_size=1, rl_tasks=rl_tasks, eval_tasks=[], sim=sim)


def test_train_cli_job_rl_writes_the_expert_where_the_next_issue_looks(sft_xs, tmp_path):
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "chorus.train", "job=rl", "sft_stage=stage1",
                        f"sft_stage.checkpoint={sft_xs}", f"runs_dir={tmp_path}", "rl.steps=1", "rl.group_size=2",
                        "rl.prompts_per_step=1", "rl.max_new_tokens=32", f"rl.max_prompt_tokens={PROMPT}",
                        "rl.tasks.difficulty=easy", "rl.tasks.per_family=1", "rl.eval_tasks.per_family=4",
                        "rl.eval_tasks.families=[counter]", "rl.eval_samples=1", f"hydra.run.dir={tmp_path / 'h'}"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    info = json.loads(p.stdout.strip().splitlines()[-1])
    (expert,) = (tmp_path / "rl/dapo").glob("stage1-*")  # the stage's dir + the hash of the non-default settings
    record = json.loads((expert / "run.json").read_text())
    assert record["changed"]["rl.steps"] == 1 and record["identity"]["sft_stage.checkpoint"] == str(sft_xs)
    progress = [json.loads(line) for line in (expert / "progress.jsonl").read_text().splitlines()]
    assert [p["done"] for p in progress if p["phase"] == "rl step"] == [1]
    assert [progress[-1][k] for k in ("phase", "done", "total")] == ["held-out evaluation", 1, 1]
    assert info["checkpoint"] == str(expert / "hf") and info["sft_stage"] == "stage1" and info["rl_algo"] == "dapo"
    assert (expert / "hf/config.json").exists() and len(pd.read_parquet(expert / "per_task.parquet")) == 1
    assert "step 1/1 reward" in p.stderr + p.stdout
    # the run record: metadata, the composed config, and the default offline W&B copy with the step scalars
    summary = json.loads((expert / "summary.json").read_text())
    assert {k: summary[k] for k in ("job", "sft_stage", "rl_algo", "consolidation", "model", "seed")} == {
        "job": "rl", "sft_stage": "stage1", "rl_algo": "dapo", "consolidation": None, "model": "tiny-s", "seed": 0}
    assert summary["git_revision"] is None or len(summary["git_revision"]) >= 40
    assert summary["machine"] == machine_kind()
    assert "rl_algo" in (expert / ".hydra/config.yaml").read_text()
    (wandb_run,) = (expert / "wandb").glob("offline-run-*/run-*.wandb")
    # what W&B shows after sync: the held-out result under eval/, never replaced by the last training
    # batch (logged under train/, and written by W&B at finish, after the summary)
    shown = final_summary(wandb_run)
    assert shown["eval/pass_rate"] == summary["pass_rate"] and shown["eval/n_tasks"] == 1
    assert "train/reward_mean" in shown and "pass_rate" not in shown and shown["job"] == "rl"
    (run,) = [r.run for r in records(wandb_run) if r.WhichOneof("record_type") == "run"]
    assert run.run_group == str(tmp_path) and run.job_type == "rl"  # grouped by the runs dir
    assert {"job=rl", "rl_algo=dapo", "sft_stage=stage1"} <= set(run.tags)
    assert run.run_id == (expert / "wandb-run-id").read_text().strip()


@pytest.mark.slow
def test_sigterm_mid_run_saves_a_checkpoint_exits_nonzero_and_the_same_command_resumes(sft_xs, tmp_path):
    import signal
    import subprocess
    import sys
    import time

    argv = [sys.executable, "-m", "chorus.train", "job=rl", "sft_stage=stage1", f"sft_stage.checkpoint={sft_xs}",
            f"runs_dir={tmp_path}", "rl.steps=3", "rl.save_every=100", "rl.group_size=2", "rl.prompts_per_step=1",
            "rl.max_new_tokens=32", f"rl.max_prompt_tokens={PROMPT}", "rl.tasks.difficulty=easy",
            "rl.tasks.per_family=1", "rl.eval_tasks.per_family=4", "rl.eval_tasks.families=[counter]",
            "rl.eval_samples=1", f"hydra.run.dir={tmp_path / 'h'}"]
    job = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while not list(tmp_path.glob("rl/dapo/stage1-*/steps.jsonl")) and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    job.send_signal(signal.SIGTERM)  # once step 1 logged: the run ends with the step under way (1, or 2)
    out, err = job.communicate(timeout=600)
    (expert,) = tmp_path.glob("rl/dapo/stage1-*")
    assert job.returncode == 128 + signal.SIGTERM, err[-2000:]
    said = re.search(r"chorus.train: error: stopped by SIGTERM after step (\d)/3; .*run the same command again", err)
    assert said and int(said.group(1)) in (1, 2), err[-2000:]
    done = int(said.group(1))
    assert (tmp_path / "h/error.txt").read_text().startswith(f"stopped by SIGTERM after step {done}/3")
    assert (expert / "ckpt/last.ckpt").exists() and not (expert / "summary.json").exists()
    assert not (expert / "hf").exists() and [s["step"] for s in lines(expert / "steps.jsonl")] == list(range(1, done + 1))

    again = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert [s["step"] for s in lines(expert / "steps.jsonl")] == [1, 2, 3]  # resumed after the saved step
    assert json.loads((expert / "summary.json").read_text())["resumed_from"] == str(expert / "ckpt/last.ckpt")
    # one W&B run for the run dir: the resumed job logged into the same run id
    ids = {p.name.rsplit("-", 1)[1] for p in (expert / "wandb").glob("offline-run-*")}
    assert len(list((expert / "wandb").glob("offline-run-*"))) == 2 and ids == {(expert / "wandb-run-id").read_text().strip()}


def test_several_minibatches_make_the_clip_act_and_the_run_still_resumes_and_ends(sft_xs, rl_tasks, sim, tmp_path):
    run(sft_xs, tmp_path, steps=2, mini_batches=2, rl_tasks=rl_tasks, eval_tasks=[], sim=sim)
    steps = lines(tmp_path / "steps.jsonl")
    updated = [s for s in steps if s["update_skipped"] == 0]
    assert updated and all(s["optimizer_steps"] == 2 and s["ratio_dev_first"] < 1e-3 for s in updated)
    assert any(s["clip_frac_low"] + s["clip_frac_high"] > 0 for s in updated), steps
    resumed = run(sft_xs, tmp_path, steps=3, mini_batches=2, rl_tasks=rl_tasks, eval_tasks=[], sim=sim)
    assert resumed["resumed_from"].endswith("last.ckpt") and resumed["steps"] == 3
    assert [s["step"] for s in lines(tmp_path / "steps.jsonl")] == [1, 2, 3]
