"""DDP with 2 real gloo ranks on the CPU, through the real run path (train_rl / train_opd with
TrainerConf(accelerator="cpu", devices=2, strategy="ddp")): ranks that keep different numbers of rows,
or none, still run the same collectives, so the job ends and both ranks hold the same weights.

Each job runs in a subprocess under a hard timeout (a hang fails instead of blocking CI). Lightning's
ddp launcher re-executes that subprocess's command line for rank 1, so this file is also the job's
script (`python tests/test_ddp.py rl|opd ...`). Which rows each rank keeps is set per rank: for RL by
the dynamic-sampling threshold the real `collect` gets on each rank (inf: every group dropped; -1: every
group kept); for OPD by the teacher's reward table, which lists only rank 0's tasks
(teacher_pool.missing=skip routes rank 1's tasks to no teacher)."""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from chorus.rl.losses import micro_slices, minibatch_counts, minibatch_slices

HERE = Path(__file__).resolve().parent
JOB_TIMEOUT_S = 300


def recording(base):
    """The module a job trains, plus a record per rank: each update's stats, then the final weights."""
    class Recording(base):
        def _update(self, *args):
            stats = super()._update(*args)
            self.updates.append({"step": self.global_step, **stats})  # the rollout's last opt.step counted it
            return stats

        def on_fit_start(self):
            super().on_fit_start()
            self.updates = []

        def on_train_end(self):
            torch.save({"state": {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()},
                        "updates": self.updates, "world": self.trainer.world_size, "step": self.global_step},
                       Path(self.hooks_out) / f"rank{self.global_rank}.pt")
    return Recording


def _job(kind: str, init: str, out: str, cache_dir: str, teacher: str | None = None) -> None:
    sys.path.insert(0, str(HERE))
    from helpers import PROMPT, context, rl_settings

    from chorus.config.schema import TrainerConf
    from chorus.rl.task_sampler import TaskSampler
    from chorus.sim import SimConfig
    from chorus.tasks import load_tasks

    tasks = load_tasks("generated", split="train", difficulty="easy", per_family=2, seed=0)
    eval_tasks = load_tasks("generated", split="test", difficulty="easy", per_family=4, seed=0)[:1]
    ctx = context(out, SimConfig(cache=False, cache_dir=cache_dir, run_timeout_s=20), workers=1)
    trainer = TrainerConf(accelerator="cpu", devices=2, strategy="ddp")
    rl = rl_settings(group_size=2, micro_batch=1, mini_batches=2, max_new_tokens=24, max_prompt_tokens=PROMPT)
    if kind == "vllm":  # RL with engine=vllm on the stand-in LLM (tests/vllm_standin.py), one per rank
        import vllm_standin

        from chorus.rl.algos import get_algo
        from chorus.rl.module import RLModule
        from chorus.rl.run import Objective, train_rl

        vllm_standin.install()
        module = recording(RLModule)
        module.hooks_out = out
        info = train_rl(init, get_algo("dapo", dynamic_sampling=False), tasks, eval_tasks, ctx,
                        rl=dataclasses.replace(rl, engine="vllm", steps=1), trainer=trainer,
                        objective=Objective(module=module))
        [llm] = vllm_standin.BUILT
        rank = int(os.environ["RANK"])  # named for vLLM's external launcher by chorus.rl.run.vllm_options
        (Path(out) / f"engine{rank}.json").write_text(json.dumps(
            {"world_at_build": llm.world_at_build, "kwargs": llm.kwargs, "calls": llm.calls}))
    elif kind == "rl":
        from chorus.rl.algos import get_algo
        from chorus.rl.module import RLModule
        from chorus.rl.rollouts import collect
        from chorus.rl.run import Objective, train_rl

        calls = []

        def collect_per_rank(draw, engine, tok, pool, spec, prompts_per_step, **kw):
            # step 1: rank 1's dynamic sampling drops every group, rank 0 keeps both (4 rows);
            # step 2: rank 1 keeps 1 group (2 rows: fewer micro-batches than rank 0), rank 0 both again
            rank, step = torch.distributed.get_rank(), len(calls) + 1
            calls.append(step)
            threshold = float("inf") if rank == 1 and step == 1 else -1.0
            spec = dataclasses.replace(spec, algo=dataclasses.replace(spec.algo, std_threshold=threshold,
                                                                      max_refills=0))
            k = 1 if rank == 1 and step == 2 else prompts_per_step
            return collect(draw, engine, tok, pool, spec, k, **kw)

        module = recording(RLModule)
        module.hooks_out = out
        info = train_rl(init, get_algo("dapo", overlong_buffer=16), tasks, eval_tasks, ctx, rl=rl, trainer=trainer,
                        objective=Objective(collect=collect_per_rank, module=module))
    else:
        import chorus.opd.run as opd_run
        from chorus.config.schema import OPDConf, TeacherPoolConf
        from chorus.opd.teachers import Teacher

        # the table holds rank 0's tasks of the one step only: rank 1's are skipped (no teacher reward)
        rank0 = TaskSampler(tasks, ctx.seed).draw_share(rl.prompts_per_step, 2, 0)
        table = Path(out) / "teacher_eval"
        table.mkdir(parents=True, exist_ok=True)
        row = {"status": "ok", "overall": 100.0, "passed": True}  # the columns the gate reads
        (table / "per_task.jsonl").write_text("".join(json.dumps({"task_id": t.id, **row}) + "\n" for t in rank0))
        opd_run.OPDModule = recording(opd_run.OPDModule)  # the module train_opd builds, recording per rank
        opd_run.OPDModule.hooks_out = out
        pool = TeacherPoolConf(teachers=[Teacher("good", teacher, "table", str(table))], missing="skip")
        opd = OPDConf(teachers_in_memory=True)
        info = opd_run.train_opd(init, pool, tasks, eval_tasks, ctx, opd=opd, rl=dataclasses.replace(rl, steps=1),
                                 trainer=trainer)
    if info:  # rank 0
        (Path(out) / "info.json").write_text(json.dumps({"steps": info["steps"]}))


def run_job(tmp_path: Path, *args: str) -> tuple[dict, dict, dict]:
    """Run a 2-rank job; returns rank 0's and rank 1's records and rank 0's run info."""
    from helpers import run_rank_script

    run_rank_script(__file__, tmp_path, args, JOB_TIMEOUT_S)
    out = Path(args[2])
    r0, r1 = (torch.load(out / f"rank{r}.pt", weights_only=False) for r in (0, 1))
    return r0, r1, json.loads((out / "info.json").read_text())


def _assert_same_weights_and_moved(r0: dict, r1: dict, init: str) -> None:
    from helpers import weights

    assert r0["world"] == r1["world"] == 2
    assert r0["state"].keys() == r1["state"].keys()
    differ = [k for k in r0["state"] if not torch.equal(r0["state"][k], r1["state"][k])]
    assert differ == []  # DDP kept the ranks in sync, padding passes included
    before = weights(init)
    moved = [k for k in before if not torch.equal(before[k], r0["state"][k].to(before[k].dtype))]
    assert moved  # rank 0's rows trained both ranks' copies


def test_minibatch_counts_and_micro_batches_hand_computed():
    mask = torch.tensor([[0, 1, 1], [1, 1, 1], [0, 0, 1]])  # 2, 3, 1 completion tokens
    parts = minibatch_slices(3, 4)  # rows 0, 1, 2 and an empty fourth
    assert minibatch_counts(mask, parts, "token_mean") == [2.0, 3.0, 1.0, 0.0]  # unclamped: summed over ranks
    assert minibatch_counts(mask, parts, "seq_mean") == [1.0, 1.0, 1.0, 0.0]
    lengths = [10, 30, 20, 20, 50, 5, 5]
    assert [len(micro_slices(p, lengths, 3)) for p in minibatch_slices(7, 2)] == [2, 1]  # 4 rows -> 3 + 1; 3 -> 3
    assert micro_slices(slice(0, 0), [], 3) == []
    # a budget of 60 padded tokens: [10, 30] (2 x 30), [20, 20] (2 x 20; a third row would make 3 x 50),
    # [50] alone, [5, 5]; a row over the budget goes alone; rl.micro_batch is then not a cap
    assert micro_slices(slice(0, 7), lengths, 1, 60) == [slice(0, 2), slice(2, 4), slice(4, 5), slice(5, 7)]
    assert micro_slices(slice(4, 7), lengths, 1, 40) == [slice(4, 5), slice(5, 7)]
    with pytest.raises(ValueError, match="micro_batch"):
        micro_slices(parts[0], lengths, 0)
    with pytest.raises(ValueError, match="micro_tokens"):
        micro_slices(parts[0], lengths, 1, 0)


@pytest.mark.parametrize("lora", [None, {"r": 2, "alpha": 4, "dropout": 0.0, "target_modules": None}])
def test_a_padding_pass_gives_every_trainable_parameter_a_zero_gradient(tiny_xs, lora):
    """What keeps a rank without rows in DDP's all-reduce: a gradient (of zeros) on each trainable
    parameter, the adapter's only under LoRA, and nothing on the frozen base."""
    from chorus.config.schema import RLConf
    from chorus.policy.models import load_model
    from chorus.rl.algos import get_algo
    from chorus.rl.module import Hooks, RLModule

    model, _ = load_model("hf", path=str(tiny_xs), dtype="float32", lora=lora)
    module = RLModule(model, get_algo("dapo"), RLConf(), Hooks(rollout=lambda step: None), identity={})
    module.manual_backward = lambda loss: loss.backward()  # outside a trainer: the plain backward
    module._padding_backward()
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(p.grad is not None and not p.grad.any() for _, p in trainable)
    assert all(p.grad is None for p in model.parameters() if not p.requires_grad)
    assert (lora is not None) == all("lora_" in n for n, _ in trainable)


@pytest.mark.slow
def test_ddp_rl_ranks_with_no_or_fewer_kept_rows_end_in_sync(sft_xs, sim, tmp_path):
    r0, r1, info = run_job(tmp_path, "rl", str(sft_xs), str(tmp_path / "run"), sim.cache_dir)
    assert info["steps"] == 2 and r0["step"] == r1["step"] == 2
    _assert_same_weights_and_moved(r0, r1, sft_xs)
    by_step = {(r, u["step"]): u for r, rec in enumerate((r0, r1)) for u in rec["updates"]}
    assert sorted(by_step) == [(0, 1), (0, 2), (1, 1), (1, 2)]  # rank 1 updates at step 1 too, without rows
    for step in (1, 2):  # 2 mini-batches: the same optimizer steps on both ranks
        assert by_step[0, step]["optimizer_steps"] == by_step[1, step]["optimizer_steps"] == 2
        assert by_step[0, step]["padding_passes"] == 0  # 4 rows: 2 + 2, 2 micro-batches of 1 each
    assert by_step[1, 1]["padding_passes"] == 4  # no rows: 2 x 2 zero-weight passes
    assert by_step[1, 2]["padding_passes"] == 2  # 2 rows: 1 + 1, one micro-batch each, one pad each
    assert by_step[0, 1]["grad_norm"] == pytest.approx(by_step[1, 1]["grad_norm"])  # the same reduced gradients


@pytest.mark.slow
def test_ddp_opd_with_one_rank_all_skipped_ends_in_sync(sft_xs, tiny_xs, sim, tmp_path):
    r0, r1, info = run_job(tmp_path, "opd", str(tiny_xs), str(tmp_path / "run"), sim.cache_dir, str(sft_xs))
    assert info["steps"] == 1 and r0["step"] == r1["step"] == 1
    _assert_same_weights_and_moved(r0, r1, tiny_xs)
    (u0,), (u1,) = r0["updates"], r1["updates"]
    assert u0["optimizer_steps"] == u1["optimizer_steps"] == 2
    assert u0["padding_passes"] == 0 and u1["padding_passes"] == 4
    decisions = [json.loads(ln) for ln in (tmp_path / "run/decisions.jsonl").read_text().splitlines()]
    assert len(decisions) == 2 and all(d["teacher"] == "good" for d in decisions)  # rank 0's, both routed


@pytest.mark.slow
def test_ddp_with_vllm_builds_one_engine_per_rank_inside_lightnings_process_group(sft_xs, sim, tmp_path):
    """vLLM's own executor, built before fit, would initialise torch.distributed with a world of 1 that
    Lightning then keeps: every rank would train alone. Built at train start, each rank's engine joins
    the 2-rank group Lightning made (vLLM's external_launcher, tensor-parallel size 1), and the ranks
    train one model."""
    r0, r1, info = run_job(tmp_path, "vllm", str(sft_xs), str(tmp_path / "run"), sim.cache_dir)
    assert info["steps"] == 1 and r0["world"] == r1["world"] == 2
    _assert_same_weights_and_moved(r0, r1, sft_xs)
    engines = [json.loads((tmp_path / f"run/engine{r}.json").read_text()) for r in (0, 1)]
    for e in engines:
        assert e["world_at_build"] == 2  # the process group existed when the engine was built
        assert e["kwargs"]["distributed_executor_backend"] == "external_launcher"
        assert e["kwargs"]["tensor_parallel_size"] == 1 and e["calls"][:2] == ["load", "reset"]
    assert engines[1]["kwargs"]["seed"] == engines[0]["kwargs"]["seed"] + 1  # ranks sample apart


if __name__ == "__main__":
    _job(*sys.argv[1:])


@pytest.mark.parametrize("environ, rank", [({}, 0), ({"LOCAL_RANK": "1"}, 1), ({"RANK": "3", "LOCAL_RANK": "1"}, 3),
                                           ({"SLURM_PROCID": "2"}, 2), ({"RANK": " "}, 0)])
def test_process_rank_reads_the_launchers_variables(environ, rank):
    from chorus.config.job_context import process_rank

    assert process_rank(environ) == rank


@pytest.mark.slow
def test_the_train_cli_under_ddp_ends_with_one_record_one_wandb_run_and_one_result(sft_xs, tmp_path):
    """`python -m chorus.train ... trainer.devices=2 trainer.strategy=ddp` on 2 CPU ranks: Lightning
    re-executes the command for rank 1, which trains but leaves run.json, the W&B run and the printed
    result to rank 0 (both ranks used to open a W&B run in the same dir and print a result)."""
    from helpers import PROMPT

    cmd = [sys.executable, "-m", "chorus.train", "job=rl", "sft_stage=stage1", f"sft_stage.checkpoint={sft_xs}",
           f"runs_dir={tmp_path}", "rl.steps=1", "rl.group_size=2", "rl.prompts_per_step=1", "rl.max_new_tokens=24",
           f"rl.max_prompt_tokens={PROMPT}", "rl.tasks.difficulty=easy", "rl.tasks.per_family=1",
           "rl.eval_tasks.per_family=4", "rl.eval_tasks.families=[counter]", "rl.eval_samples=1",
           "trainer.accelerator=cpu", "trainer.devices=2", "trainer.strategy=ddp", f"hydra.run.dir={tmp_path / 'h'}"]
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = job.communicate(timeout=JOB_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        pytest.fail(f"the 2-rank chorus.train job did not end within {JOB_TIMEOUT_S} s")
    assert job.returncode == 0, err[-2000:]
    results = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    (expert,) = (tmp_path / "rl/dapo").glob("stage1-*")
    assert len(results) == 1 and results[0]["checkpoint"] == str(expert / "hf")
    assert json.loads((expert / "run.json").read_text())["identity"]["trainer.devices"] == 2
    assert len(list((expert / "wandb").glob("offline-run-*"))) == 1
