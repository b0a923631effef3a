"""trainer.strategy=fsdp (FSDP2, chorus/fsdp.py) with 2 real gloo ranks on the CPU: RL's update (the
real RLModule under Lightning, several forward/backward passes per optimizer step, clipping by norm
over sharded gradients, padding passes) on fixed rollout batches ends with the weights a single
process reaches on the same rows, and the state dicts for vLLM's sync and for checkpoints are the full
tensors under the model's own names.

Each job runs in a subprocess under a hard timeout (a hang fails instead of blocking CI); Lightning
re-executes that subprocess's command line for rank 1, so this file is also the job's script
(`python tests/test_fsdp.py <world> <offload> <out>`).

The batches are fixed random rows (no generation: trainer=fsdp generates with vLLM), the same on
every run: per step, rank r's rows; the single process gets every rank's rows of mini-batch k as its
own mini-batch k (`union`), so each optimizer step sees the same rows and the same token-mean
normaliser. Rows per rank (rank 0, rank 1): step 1 (4, 4), step 2 (4, 2: rank 1 runs fewer
micro-batches and pads), step 3 (2, 0: rank 1 has no rows, and pads its old-log-prob forwards too).

Tolerance: float32, 1e-5 absolute on the weights. The runs differ only in summation order (a
reduce-scatter adds two ranks' gradients where one process accumulates micro-batches in turn),
rounding at ~1e-7 relative; AdamW at lr 1e-2 moves each weight by up to ~1e-2 per step, 1000x the
tolerance, so a rank's missing or doubled gradient, a wrong normaliser or a skipped step fails."""
from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
JOB_TIMEOUT_S = 300
STEPS = 3
ROWS = {1: (4, 4), 2: (4, 2), 3: (2, 0)}  # step -> rows of rank 0, rank 1
WIDTH, PROMPT = 10, 4  # tokens per row (right-padded), prompt tokens of each row
MINI_BATCHES = 2


def tiny_qwen3():
    """A random-init Qwen3 (2 decoder layers, tied embeddings), the same in every process."""
    from transformers import AutoModelForCausalLM, Qwen3Config

    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                      head_dim=16, intermediate_size=48, tie_word_embeddings=True, max_position_embeddings=64)
    return AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)


def rows(step: int, rank: int):
    """Rank `rank`'s fixed rollout rows at `step`: random tokens, lengths 6..10, advantages."""
    from chorus.rl.rollouts import RolloutBatch

    n = ROWS[step][rank]
    g = torch.Generator().manual_seed(1000 * step + rank)
    lengths = torch.randint(PROMPT + 2, WIDTH + 1, (n,), generator=g)
    attn = (torch.arange(WIDTH)[None] < lengths[:, None]).long()
    ids = torch.randint(4, 64, (n, WIDTH), generator=g) * attn
    completion = attn.clone()
    completion[:, :PROMPT] = 0
    return RolloutBatch(ids, attn, completion, torch.zeros(n, WIDTH), torch.randn(n, generator=g),
                        [{"row": i} for i in range(n)], {})


def union(batches: list, mini_batches: int):
    """One process's batch holding every rank's rows, ordered so that its mini-batch k is the ranks'
    mini-batches k together (checked: its own cut must fall on the same rows)."""
    from chorus.rl.losses import minibatch_slices
    from chorus.rl.rollouts import RolloutBatch

    parts = [minibatch_slices(b.input_ids.size(0), mini_batches) for b in batches]
    order = [(b, p[k]) for k in range(mini_batches) for b, p in zip(batches, parts)]
    sizes = [sum(p[k].stop - p[k].start for p in parts) for k in range(mini_batches)]
    total = sum(sizes)
    assert [s.stop - s.start for s in minibatch_slices(total, mini_batches)] == sizes

    def cat(field):
        return torch.cat([getattr(b, field)[sl] for b, sl in order])

    return RolloutBatch(cat("input_ids"), cat("attention_mask"), cat("completion_mask"), cat("old_logprobs"),
                        cat("advantages"), [r for b, sl in order for r in b.rows[sl]], {})


class Recorder:
    """Where `weight_sync` puts the weights: what a vLLM engine would load."""

    def sync_weights(self, items):
        self.weights = {k: v.detach().clone() for k, v in items}


def _job(world: str, offload: str, out: str, steps: str = str(STEPS), resume: str = "", mixed: str = "-") -> None:
    import dataclasses

    import lightning as L

    from chorus.config.schema import RLConf, TrainerConf
    from chorus.rl.algos import get_algo
    from chorus.rl.module import Hooks, RLModule
    from chorus.rl.run import weight_sync
    from chorus.trainer_setup import build_trainer, fused_optimizer

    world = int(world)
    rank = int(os.environ.get("LOCAL_RANK", 0))

    def rollout(step: int):
        step += 1  # Lightning's global_step counts finished rollouts
        return rows(step, rank) if world > 1 else union([rows(step, r) for r in range(2)], MINI_BATCHES)

    class Recording(RLModule):
        def _update(self, *args):
            stats = super()._update(*args)
            self.updates.append(stats)
            return stats

        def on_fit_start(self):
            super().on_fit_start()
            self.updates, self.compute_dtypes = [], set()

        def on_train_start(self):
            super().on_train_start()
            # the dtype a decoder layer's weights have during its forward (gathered by FSDP2 first)
            layer = self.model.model.layers[0]
            layer.register_forward_pre_hook(
                lambda m, args: self.compute_dtypes.add(m.self_attn.q_proj.weight.dtype))

        def on_train_end(self):  # every rank: the sync gathers from all of them
            engine = Recorder()
            weight_sync(engine)(self.model)
            torch.save({"synced": engine.weights, "updates": self.updates, "world": self.trainer.world_size,
                        "sharded": type(self.model).__name__, "compute_dtypes": self.compute_dtypes,
                        "master_dtypes": {p.dtype for p in self.model.parameters()},
                        "fused": self.optimizers().optimizer.defaults["fused"]},
                       Path(out) / f"rank{self.global_rank}.pt")

    rl = dataclasses.replace(RLConf(), mini_batches=MINI_BATCHES, micro_batch=1, lr=1e-2, warmup_steps=1,
                             steps=int(steps), grad_clip=0.5, max_new_tokens=WIDTH - PROMPT)
    # mixed: the GPU's settings, bf16-mixed (FSDP2 gathers bf16, reduces fp32) and the fused AdamW
    gpu = dict(precision="bf16-mixed", fused_optimizer=True) if mixed == "mixed" else {}
    trainer = TrainerConf(accelerator="cpu", devices=world, strategy="fsdp" if world > 1 else "auto",
                          fsdp_cpu_offload=offload == "offload", **gpu)
    module = Recording(tiny_qwen3(), get_algo("dapo"), rl, Hooks(rollout=rollout), identity={},
                       fused=fused_optimizer(trainer))
    ckpt = L.pytorch.callbacks.ModelCheckpoint(dirpath=Path(out) / "ckpt", save_last=True, save_top_k=0,
                                               every_n_train_steps=1)
    fit = build_trainer(trainer, max_steps=int(steps), callbacks=[ckpt], logger=False)
    fit.fit(module, torch.utils.data.DataLoader(Ticks(), batch_size=None), ckpt_path=resume or None)


def _rl_job(init: str, out: str, cache_dir: str) -> None:
    """The real RL run path (train_rl) under trainer=fsdp on 2 ranks, generating with the vLLM stand-in."""
    import json

    sys.path.insert(0, str(HERE))
    import vllm_standin
    from helpers import PROMPT as TASK_PROMPT
    from helpers import context, rl_settings

    from chorus.config.schema import TrainerConf
    from chorus.rl.algos import get_algo
    from chorus.rl.run import train_rl
    from chorus.sim import SimConfig
    from chorus.tasks import load_tasks

    vllm_standin.install()
    tasks = load_tasks("generated", split="train", difficulty="easy", per_family=2, seed=0)
    eval_tasks = load_tasks("generated", split="test", difficulty="easy", per_family=4, seed=0)[:1]
    ctx = context(out, SimConfig(cache=False, cache_dir=cache_dir, run_timeout_s=20), workers=1)
    rl = rl_settings(group_size=2, micro_batch=1, mini_batches=2, max_new_tokens=24, max_prompt_tokens=TASK_PROMPT,
                     engine="vllm", steps=1)
    info = train_rl(init, get_algo("dapo", dynamic_sampling=False), tasks, eval_tasks, ctx, rl=rl,
                    trainer=TrainerConf(accelerator="cpu", devices=2, strategy="fsdp"))
    [llm] = vllm_standin.BUILT
    torch.save({"engine": llm.weights(), "calls": llm.calls, "world_at_build": llm.world_at_build},
               Path(out) / f"engine{os.environ.get('LOCAL_RANK', '0')}.pt")
    if info:  # rank 0
        (Path(out) / "info.json").write_text(json.dumps({"steps": info["steps"], "checkpoint": info["checkpoint"]}))


class Ticks(torch.utils.data.IterableDataset):
    def __iter__(self):
        while True:
            yield 0


def run_job(out: Path, world: int, offload: bool = False, steps: int = STEPS, resume: Path | None = None,
            mixed: bool = False) -> list[dict]:
    """Run the update job (`steps` rollouts, from the checkpoint `resume` when given; `mixed`: bf16-mixed
    with the fused AdamW); returns each rank's record."""
    out.mkdir(parents=True)
    run_script(out, str(world), "offload" if offload else "-", str(out), str(steps), str(resume or ""),
               "mixed" if mixed else "-")
    return [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(world)]


def run_script(cwd: Path, *args: str) -> None:
    """This file as a job's script, under JOB_TIMEOUT_S."""
    from helpers import run_rank_script

    run_rank_script(__file__, cwd, args, JOB_TIMEOUT_S)


@pytest.fixture(scope="module")
def single(tmp_path_factory) -> tuple[dict, Path]:
    """One process's 3 steps on the union of the ranks' rows (the reference), once per module: its
    record and its run dir."""
    out = tmp_path_factory.mktemp("fsdp-single") / "run"
    return run_job(out, 1)[0], out


def test_union_puts_each_ranks_minibatch_k_into_the_single_processs_minibatch_k():
    a, b = rows(2, 0), rows(2, 1)  # 4 and 2 rows: mini-batches [0, 1] [2, 3] and [0] [1]
    u = union([a, b], MINI_BATCHES)
    expected = torch.cat([a.input_ids[0:2], b.input_ids[0:1], a.input_ids[2:4], b.input_ids[1:2]])
    assert torch.equal(u.input_ids, expected) and len(u.rows) == 6


def test_each_decoder_layer_is_a_unit_and_a_model_without_layers_is_refused():
    from chorus.fsdp import decoder_layers

    model = tiny_qwen3()
    assert decoder_layers(model) == list(model.model.layers)  # Qwen3DecoderLayer, named in _no_split_modules
    with pytest.raises(ValueError, match="names no decoder layer class.*use trainer.strategy=ddp"):
        decoder_layers(torch.nn.Linear(2, 2))


def test_sft_refuses_fsdp_in_one_line(tmp_path):
    from chorus.config.schema import TrainerConf
    from chorus.sft.run import train_sft

    with pytest.raises(ValueError, match="SFT does not run under trainer=fsdp yet.*use trainer=ddp"):
        train_sft("no-model-is-loaded", [], tmp_path, trainer=TrainerConf(strategy="fsdp"))


@pytest.mark.slow
@pytest.mark.parametrize("offload", [False, True], ids=["sharded", "cpu_offload"])
def test_fsdp_rl_update_on_2_ranks_matches_one_process(tmp_path, offload, single):
    single, single_dir = single
    r0, r1 = run_job(tmp_path / "fsdp", 2, offload)
    assert r0["world"] == r1["world"] == 2 and r0["sharded"].startswith("FSDP")  # the policy was sharded
    names = set(tiny_qwen3().state_dict())
    # vLLM's sync: full tensors with the model's own names, the same on both ranks
    assert set(r0["synced"]) == set(r1["synced"]) == set(single["synced"]) == names
    assert all(torch.equal(r0["synced"][k], r1["synced"][k]) for k in names)
    assert all(r0["synced"][k].shape == single["synced"][k].shape for k in names)
    gap = max(float((r0["synced"][k] - single["synced"][k]).abs().max()) for k in names)
    init = tiny_qwen3().state_dict()
    moved = max(float((single["synced"][k] - init[k]).abs().max()) for k in names)
    assert gap < 1e-5 and moved > 1e-2  # the same update, and one that moved the weights 1000x the tolerance
    # the same optimizer steps and gradient norms (before clipping; over the sharded gradients)
    assert [u["optimizer_steps"] for u in r0["updates"]] == [u["optimizer_steps"] for u in single["updates"]] == [2] * 3
    for u0, u1, u in zip(r0["updates"], r1["updates"], single["updates"]):
        assert u0["grad_norm"] == pytest.approx(u["grad_norm"], rel=1e-5) == u1["grad_norm"]
    # rank 1 kept in step: step 2, 2 rows against rank 0's 4 (one pad per mini-batch); step 3, none (2 pads)
    assert [u["padding_passes"] for u in r1["updates"]] == [0, 2, 2]
    assert [u["padding_passes"] for u in r0["updates"]] == [0, 0, 0]
    # the checkpoint rank 0 wrote holds the full weights of the last step under the module's names
    # (the format a single process writes: one file, `model.` + the model's names), and the optimizer's state
    ckpt = torch.load(tmp_path / "fsdp/ckpt/last.ckpt", weights_only=False)
    assert ckpt["global_step"] == STEPS and set(ckpt["state_dict"]) == {f"model.{k}" for k in names}
    assert all(torch.equal(ckpt["state_dict"][f"model.{k}"], r0["synced"][k]) for k in names)
    (opt,) = ckpt["optimizer_states"]
    (alone,) = torch.load(single_dir / "ckpt/last.ckpt", weights_only=False)["optimizer_states"]
    assert len(opt["state"]) == len(alone["state"]) == len(list(tiny_qwen3().parameters()))  # each AdamW moment, full
    for i, moments in alone["state"].items():
        assert torch.allclose(opt["state"][i]["exp_avg"], moments["exp_avg"], rtol=0, atol=1e-5)


@pytest.mark.slow
def test_fsdp_under_bf16_mixed_gathers_bf16_reduces_into_fp32_masters_and_clips_a_fused_adamw(tmp_path, single):
    """The GPU's settings on 2 CPU ranks: each layer computes with bf16 weights (FSDP2's mixed-precision
    policy, not an fp32 gather cast by autocast), the masters stay fp32, the fused AdamW steps and the
    clip acts."""
    single, _ = single
    r0, r1 = run_job(tmp_path / "mixed", 2, mixed=True)
    for r in (r0, r1):
        assert r["compute_dtypes"] == {torch.bfloat16} and r["master_dtypes"] == {torch.float32} and r["fused"]
        assert [u["optimizer_steps"] for u in r["updates"]] == [2] * 3
        assert all(math.isfinite(u["grad_norm"]) and u["grad_norm"] > 0.5 for u in r["updates"])  # clip 0.5 binds
    names = set(single["synced"])
    assert all(torch.equal(r0["synced"][k], r1["synced"][k]) for k in names)  # one model on both ranks
    # the update moved every weight tensor; not compared with the fp32 run: Adam's first steps are about
    # lr x sign(gradient), and bf16 compute flips the sign of small gradient entries
    init = tiny_qwen3().state_dict()
    assert all(not torch.equal(r0["synced"][k], init[k]) for k in names)


@pytest.mark.slow
def test_fsdp_resumes_from_its_checkpoint_to_the_same_weights(tmp_path, single):
    """2 steps under FSDP, then a new 2-rank run resumed from that run's checkpoint (Lightning loads the
    one-file checkpoint into the shards: weights, AdamW moments, step, LR schedule) for step 3: the
    weights one process reaches in 3 steps on the same rows."""
    single, _ = single
    run_job(tmp_path / "first", 2, steps=2)
    r0, r1 = run_job(tmp_path / "resumed", 2, resume=tmp_path / "first/ckpt/last.ckpt")
    assert len(r0["updates"]) == len(r1["updates"]) == 1  # only step 3 ran after the resume
    assert r1["updates"][0]["padding_passes"] == 2  # step 3's rows: rank 1 has none
    names = set(single["synced"])
    assert max(float((r0["synced"][k] - single["synced"][k]).abs().max()) for k in names) < 1e-5
    assert r0["updates"][0]["grad_norm"] == pytest.approx(single["updates"][-1]["grad_norm"], rel=1e-5)


@pytest.mark.slow
def test_fsdp_rl_run_syncs_the_engines_and_exports_the_trained_weights(sft_xs, sim, tmp_path):
    """train_rl under trainer=fsdp with rl.engine=vllm (the stand-in, one per rank): each rank's engine
    gets the full updated weights, and rank 0 exports the same weights from the gathered shards."""
    import json

    from helpers import weights

    run_script(tmp_path, "rl", str(sft_xs), str(tmp_path / "run"), sim.cache_dir)
    info = json.loads((tmp_path / "run/info.json").read_text())
    e0, e1 = (torch.load(tmp_path / f"run/engine{r}.pt", weights_only=False) for r in (0, 1))
    assert info["steps"] == 1 and e0["world_at_build"] == e1["world_at_build"] == 2
    assert e0["calls"][:2] == ["load", "reset"]  # synced at train start, then after the update
    exported, before = weights(info["checkpoint"]), weights(sft_xs)
    assert set(exported) <= set(e0["engine"])
    assert all(torch.equal(e0["engine"][k], e1["engine"][k]) for k in e0["engine"])  # one model on both ranks
    assert all(torch.equal(exported[k], e0["engine"][k]) for k in exported)  # the export is what the engines hold
    assert any(not torch.equal(exported[k], before[k]) for k in exported)  # and the update moved it


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    if sys.argv[1] == "rl":
        _rl_job(*sys.argv[2:])
    else:
        _job(*sys.argv[1:])
