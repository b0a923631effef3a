"""Merges on hand-computed tensors, and streaming merges of real (tiny) checkpoints."""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from chorus.merge.methods import dare, della, drop_probabilities, soup, task_arithmetic, ties, trim_threshold
from chorus.merge.stream import merge_checkpoints

TAUS = [[0.5, -0.2, 0.1, -0.9, 0.0], [-0.4, -0.3, 0.2, 0.8, 0.05], [0.1, 0.6, -0.7, 0.3, -0.02]]


def t(x):
    return torch.tensor(x)


def test_ties_trims_elects_and_takes_the_disjoint_mean():
    merged = ties([t(x) for x in TAUS], torch.zeros(5), density=0.4)
    assert merged.tolist() == pytest.approx([0.5, 0.6, -0.7, -0.9, 0.0])
    # density 1 keeps everything: entry 0 elects + (0.5 - 0.4 + 0.1 > 0) and averages 0.5 and 0.1
    full = ties([1 + t(x) for x in TAUS], torch.ones(5), density=1.0, lam=2.0)
    assert float(full[0]) == pytest.approx(1 + 2 * 0.3)


def test_soup_and_task_arithmetic_hand_computed():
    a, b = t([1.0, 2.0]), t([3.0, 6.0])
    assert soup([a, b]).tolist() == [2.0, 4.0]
    assert soup([a, b], weights=[3, 1]).tolist() == [1.5, 3.0]
    base = t([1.0, 1.0])
    assert task_arithmetic([a, b], base, lam=0.5, normalize=False).tolist() == [2.0, 4.0]  # 1 + 0.5 * ((0, 1) + (2, 5))
    assert task_arithmetic([a, b], base, lam=0.5).tolist() == [1.5, 2.5]  # 1 + 0.5 * ((0, 1) + (2, 5)) / 2
    assert task_arithmetic([a, b], base, weights=[3, 1]).tolist() == soup([a, b], weights=[3, 1]).tolist()


# Nested experts on one-hot parts: entry k of every tensor is part k of [D1, D2, R0, R1, R2], so a
# merged task vector's entries are its coefficients on the parts. stage1 = stage0 + D1, stage2 =
# stage1 + D2, expert_i = stage_i + R_i; task vectors are against stage0.
PARTS = ("D1", "D2", "R0", "R1", "R2")
NESTED = [[0, 0, 1, 0, 0], [1, 0, 0, 1, 0], [1, 1, 0, 0, 1]]


def nested(stage0, scale=1.0):
    return [stage0 + scale * t([float(x) for x in row]).repeat_interleave(stage0.numel() // 5) for row in NESTED]


def test_the_default_weighted_mean_counts_a_shared_sft_change_once_and_the_plain_sum_twice():
    s0 = t([0.3, -0.2, 0.1, 0.5, -0.4])
    experts = nested(s0)
    coef = lambda merged: [round(x, 6) for x in (merged - s0).tolist()]  # noqa: E731
    assert coef(task_arithmetic(experts, s0)) == pytest.approx([2 / 3, 1 / 3, 1 / 3, 1 / 3, 1 / 3])
    assert coef(task_arithmetic(experts, s0, normalize=False)) == [2.0, 1.0, 1.0, 1.0, 1.0]
    assert coef(task_arithmetic(experts, s0, normalize=False, lam=0.5)) == [1.0, 0.5, 0.5, 0.5, 0.5]
    # weights 1:2:1: D1 is in experts 1 and 2 -> (2 + 1) / 4
    assert coef(task_arithmetic(experts, s0, weights=[1, 2, 1])) == pytest.approx([0.75, 0.25, 0.25, 0.5, 0.25])
    assert coef(dare(experts, s0, density=1.0)) == pytest.approx([2 / 3, 1 / 3, 1 / 3, 1 / 3, 1 / 3])
    assert coef(dare(experts, s0, density=1.0, normalize=False)) == [2.0, 1.0, 1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="sum to 0 .* consolidation.normalize=false"):
        task_arithmetic(experts, s0, weights=[1, -1, 0])
    assert coef(task_arithmetic(experts, s0, weights=[1, -1, 0], normalize=False)) == [-1.0, 0.0, 1.0, -1.0, 0.0]


def test_randomised_merges_keep_each_part_at_its_expected_coefficient():
    """20000 entries per part, density 0.5 (epsilon 0: DELLA's p is 0.5 everywhere). DARE's mean keeps
    soup's coefficients in expectation. In DELLA's disjoint mean each part counts once (only the
    experts holding it are non-zero there: TIES gives exactly 1); dividing by the surviving experts'
    weight (normalize=false) made D1 1.5: both copies survive 1/4 (mean 2 D1), one survives 1/2 (2 D1)."""
    s0 = torch.zeros(5 * 20000)
    experts = nested(s0, scale=0.01)
    coef = lambda merged: (merged / 0.01).reshape(5, -1).mean(1).tolist()  # noqa: E731
    g = torch.Generator().manual_seed(0)
    assert coef(dare(experts, s0, density=0.5, generator=g)) == pytest.approx([2 / 3] + [1 / 3] * 4, abs=0.02)
    assert coef(dare(experts, s0, density=0.5, normalize=False, generator=g)) == pytest.approx([2, 1, 1, 1, 1],
                                                                                                abs=0.04)
    assert coef(ties(experts, s0, density=1.0)) == pytest.approx([1.0] * 5)
    assert coef(della(experts, s0, density=0.5, epsilon=0.0, generator=g)) == pytest.approx([1.0] * 5, abs=0.03)
    old = coef(della(experts, s0, density=0.5, epsilon=0.0, normalize=False, generator=g))
    assert old == pytest.approx([1.5, 1.0, 1.0, 1.0, 1.0], abs=0.03)


def test_dare_drops_with_p_and_rescales_survivors_by_one_over_one_minus_p():
    base, tau = torch.zeros(20000), torch.full((20000,), 0.3)
    g = torch.Generator().manual_seed(0)
    out = dare([base + tau], base, density=0.25, generator=g)
    kept = out != 0
    assert torch.allclose(out[kept], torch.full_like(out[kept], 0.3 / 0.25))
    assert 0.23 < float(kept.float().mean()) < 0.27 and float(out.mean()) == pytest.approx(0.3, rel=0.05)
    assert dare([base + tau], base, density=1.0).tolist() == task_arithmetic([base + tau], base).tolist()


def test_della_drop_probabilities_are_magnitude_ranked_in_a_window_around_the_density():
    p = drop_probabilities(t([[0.1, -3.0, 0.5, 2.0, 0.0]]), density=0.4, epsilon=0.2)
    assert p.tolist()[0] == pytest.approx([0.65, 0.5, 0.6, 0.55, 0.7])  # largest |tau| is dropped least
    g = torch.Generator().manual_seed(1)
    tau = torch.randn(4, 50, generator=g)
    out = della([tau], torch.zeros(4, 50), density=0.5, epsilon=0.2, generator=g)
    kept = out != 0
    scale = out[kept] / tau[kept]  # each survivor is rescaled by 1 / (1 - p_i), p_i in [0.4, 0.6]
    assert float(scale.min()) >= 1 / 0.6 - 1e-5 and float(scale.max()) <= 1 / 0.4 + 1e-5
    # in expectation the rescaled survivors give back the task vector
    flat = torch.full((200, 100), 0.3) * torch.sign(torch.randn(200, 100, generator=g))
    est = della([flat], torch.zeros(200, 100), density=0.3, epsilon=0.2, generator=g)
    assert float(est.sum()) == pytest.approx(float(flat.sum()), abs=0.03 * float(flat.abs().sum()))
    # no dropping at all: DELLA reduces to TIES at density 1
    same = [t(x) for x in TAUS]
    assert torch.allclose(della(same, torch.zeros(5), density=1.0, epsilon=0.0),
                          ties(same, torch.zeros(5), density=1.0))


def test_trim_threshold_and_bad_arguments():
    assert trim_threshold(t([0.5, -0.2, 0.1, -0.9, 0.0]), 0.4) == pytest.approx(0.5)
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match=r"density must be in \(0, 1\]"):
            ties([t(TAUS[0])], torch.zeros(5), density=bad)
    with pytest.raises(ValueError, match="one weight per teacher"):
        soup([t([1.0]), t([2.0])], weights=[1.0])


@pytest.fixture(scope="module")
def experts(tiny_xs, tmp_path_factory):
    """Three experts = the tiny base plus different random task vectors, saved like any checkpoint."""
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("experts")
    paths = []
    for i in range(3):
        model = AutoModelForCausalLM.from_pretrained(tiny_xs)
        g = torch.Generator().manual_seed(i)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.01 * torch.randn(p.shape, generator=g))
        model.save_pretrained(root / f"e{i}")
        for f in ("tokenizer.json", "tokenizer_config.json"):
            if (tiny_xs / f).exists():
                shutil.copy(tiny_xs / f, root / f"e{i}" / f)
        paths.append(root / f"e{i}")
    return paths


@pytest.mark.parametrize("method, options", [("soup", {}), ("task_arithmetic", {"lam": 0.7}),
                                             ("ties", {"density": 0.3}), ("dare", {"density": 0.5}),
                                             ("della", {"density": 0.5, "epsilon": 0.1})])
def test_streamed_sharded_merge_equals_the_whole_tensor_merge(method, options, experts, tiny_xs, tmp_path):
    whole = merge_checkpoints(method, experts, tmp_path / "whole", base=tiny_xs, block_rows=1 << 30, **options)
    streamed = merge_checkpoints(method, experts, tmp_path / "streamed", base=tiny_xs, block_rows=1 << 30,
                                 shard_bytes=200_000, **options)
    assert whole["shards"] == 1 and streamed["shards"] > 1
    index = json.loads((tmp_path / "streamed/model.safetensors.index.json").read_text())["weight_map"]
    a = load_file(tmp_path / "whole/model.safetensors")
    b = {}
    for f in set(index.values()):
        b.update(load_file(tmp_path / "streamed" / f))
    assert a.keys() == b.keys() == set(index)
    assert all(torch.equal(a[k], b[k]) for k in a)
    if method in ("soup", "task_arithmetic", "ties"):  # deterministic methods: row blocks change nothing
        blocks = merge_checkpoints(method, experts, tmp_path / "blocks", base=tiny_xs, block_rows=7, **options)
        c = load_file(tmp_path / "blocks/model.safetensors")
        assert blocks["shards"] == 1 and all(torch.allclose(a[k], c[k], atol=1e-6) for k in a)
    e = [load_file(p / "model.safetensors") for p in experts]
    name = "model.layers.0.mlp.down_proj.weight"
    base = load_file(tiny_xs / "model.safetensors")[name]
    ref = {"soup": lambda: soup([x[name] for x in e]),
           "task_arithmetic": lambda: task_arithmetic([x[name] for x in e], base, lam=0.7),
           "ties": lambda: ties([x[name] for x in e], base, density=0.3)}.get(method)
    if ref:
        assert torch.allclose(a[name], ref(), atol=1e-6)


@pytest.mark.parametrize("normalize", [True, False])
def test_a_merge_job_takes_normalize_from_the_config(normalize, tiny_xs, tmp_path):
    """consolidation.normalize reaches the streamed merge: real nested checkpoints, task arithmetic."""
    from omegaconf import OmegaConf

    from chorus.config.schema import TaskArithmeticConf
    from chorus.merge.run import merge_options

    s0 = load_file(tiny_xs / "model.safetensors")
    name = "model.layers.0.mlp.down_proj.weight"
    g = torch.Generator().manual_seed(0)
    parts = {p: 0.01 * torch.randn(s0[name].shape, generator=g) for p in PARTS}
    paths = []
    for i, row in enumerate(NESTED):
        shutil.copytree(tiny_xs, tmp_path / f"e{i}")
        sd = dict(s0, **{name: s0[name] + sum(x * parts[p] for x, p in zip(row, PARTS))})
        save_file(sd, tmp_path / f"e{i}/model.safetensors", metadata={"format": "pt"})
        paths.append(tmp_path / f"e{i}")
    overrides = {} if normalize else {"normalize": False}
    cons = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(TaskArithmeticConf(name="task_arithmetic")),
                                               overrides))
    out = merge_checkpoints("task_arithmetic", paths, tmp_path / "m", base=tiny_xs, **merge_options(cons))
    merged = load_file(f"{out['checkpoint']}/model.safetensors")[name]
    d1_times = 2 / 3 if normalize else 2.0
    expect = s0[name] + d1_times * parts["D1"] + d1_times / 2 * sum(parts[p] for p in PARTS[1:])
    assert torch.allclose(merged, expect, atol=1e-6) and out["options"]["normalize"] is normalize


@pytest.mark.parametrize("method", ["dare", "della"])
def test_randomised_merges_are_seeded(method, experts, tiny_xs, tmp_path):
    one = merge_checkpoints(method, experts, tmp_path / "a", base=tiny_xs, density=0.5, seed=3)
    two = merge_checkpoints(method, experts, tmp_path / "b", base=tiny_xs, density=0.5, seed=3)
    other = merge_checkpoints(method, experts, tmp_path / "c", base=tiny_xs, density=0.5, seed=4)
    a, b, c = (load_file(f"{x['checkpoint']}/model.safetensors") for x in (one, two, other))
    assert all(torch.equal(a[k], b[k]) for k in a) and not all(torch.equal(a[k], c[k]) for k in a)


def test_merged_directory_loads_and_generates(experts, tiny_xs, tmp_path):
    from chorus.policy.engines import HFEngine, SamplingParams
    from chorus.policy.models import load_model

    merge_checkpoints("ties", experts, tmp_path / "m", base=tiny_xs, density=0.5)
    model, tok = load_model("hf", path=str(tmp_path / "m"))
    out = HFEngine(model, tok).generate(["hello"], n=1, params=SamplingParams(max_new_tokens=4))
    assert len(out[0][0].token_ids) >= 1


def test_mismatched_experts_are_refused(experts, tiny_xs, tmp_path):
    from chorus.policy.tiny import build_tiny

    other = build_tiny("s", seed=0, cache_root=tmp_path / "c")
    with pytest.raises(ValueError, match="config hidden_size differs"):
        merge_checkpoints("soup", [experts[0], other], tmp_path / "x")
    odd = tmp_path / "odd"
    shutil.copytree(experts[1], odd)
    tj = json.loads((odd / "tokenizer.json").read_text())
    tj["added_tokens"] = tj.get("added_tokens", []) + [{"id": 99999, "content": "<odd>", "special": True,
                                                          "single_word": False, "lstrip": False, "rstrip": False,
                                                          "normalized": False}]
    (odd / "tokenizer.json").write_text(json.dumps(tj))
    with pytest.raises(ValueError, match="tokenizers differ"):
        merge_checkpoints("soup", [experts[0], odd], tmp_path / "y")
    with pytest.raises(ValueError, match="needs a base"):
        merge_checkpoints("ties", experts, tmp_path / "z")


def _runs_dir(root, tiny_xs, experts):
    shutil.copytree(tiny_xs, root / "sft/stage0/hf")
    for stage, path in zip(("stage1", "stage2"), experts):
        shutil.copytree(path, root / f"rl/dapo/{stage}/hf")
    return root


def _train(*overrides, cwd=None):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "chorus.train", *overrides], capture_output=True, text=True,
                          timeout=600)


SMALL_EVAL = ["rl.eval_tasks.per_family=4", "rl.eval_tasks.families=[counter]", "rl.eval_samples=1",
              "rl.max_new_tokens=16", "rl.max_prompt_tokens=1200"]


def test_cli_merge_writes_an_evaluated_checkpoint(experts, tiny_xs, tmp_path):
    runs = _runs_dir(tmp_path / "runs", tiny_xs, experts)
    p = _train("consolidation=ties", "teacher_pool=two_experts", "consolidation.density=0.4", f"runs_dir={runs}",
               *SMALL_EVAL, f"hydra.run.dir={tmp_path / 'h'}")
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    (where,) = (runs / "consolidation/ties").iterdir()  # two_experts-<hash of the non-default settings>
    assert re.fullmatch(r"two_experts-[0-9a-f]{8}", where.name)
    assert json.loads((where / "run.json").read_text())["changed"]["consolidation.density"] == 0.4
    assert out["checkpoint"] == str(where / "hf") and out["n_tasks"] == 1 and "pass_rate" in out
    assert out["options"]["density"] == 0.4 and out["base"] == str(runs / "sft/stage0/hf")
    assert (where / "per_task.parquet").exists() and (where / "hf/merge.json").exists()
    progress = [json.loads(line) for line in (where / "progress.jsonl").read_text().splitlines()]
    assert [(p["phase"], p["done"]) for p in progress if p["phase"] == "merge"] == [("merge", 0), ("merge", 1)]
    assert (progress[-1]["phase"], progress[-1]["done"], progress[-1]["total"]) == ("held-out evaluation", 1, 1)
    for noise in ("GPU available", "litlogger", "LeafSpec", "Loading weights", "Writing model shards", "it/s]"):
        assert noise not in p.stderr + p.stdout, noise  # third-party lines that say nothing (tracking/quiet.py)
    # the same command again: a finished run with these settings is a skip, never a second run in its dir
    stamps = {f: f.stat().st_mtime_ns for f in where.rglob("*") if f.is_file()}
    again = _train("consolidation=ties", "teacher_pool=two_experts", "consolidation.density=0.4", f"runs_dir={runs}",
                   *SMALL_EVAL, f"hydra.run.dir={tmp_path / 'h2'}")
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"{where} already holds this run, finished with these settings; nothing to do" in again.stderr
    assert json.loads(again.stdout.strip().splitlines()[-1]) == {**json.loads((where / "summary.json").read_text()),
                                                                  "skipped": "done"}
    assert {f: f.stat().st_mtime_ns for f in where.rglob("*") if f.is_file()} == stamps
    assert len(list((where / "wandb").glob("offline-run-*"))) == 1


@pytest.mark.slow
def test_a_multirun_over_methods_and_densities_leaves_one_dir_per_run(experts, tiny_xs, tmp_path):
    """Before run identities, density 0.8 overwrote density 0.2 (same <pool>-<run_tag> dir)."""
    runs = _runs_dir(tmp_path / "runs", tiny_xs, experts)
    p = _train("-m", "consolidation=ties,della", "consolidation.density=0.2,0.8", "teacher_pool=two_experts",
               "run_tag=mr", "logger=none", f"runs_dir={runs}", *SMALL_EVAL, f"hydra.sweep.dir={tmp_path / 'm'}")
    assert p.returncode == 0, p.stderr[-2000:]
    dirs = sorted((runs / "consolidation").glob("*/two_experts-mr-*"))
    assert len(dirs) == 4 and all((d / "summary.json").exists() for d in dirs)
    merged = {(d.parent.name, json.loads((d / "hf/merge.json").read_text())["options"]["density"]) for d in dirs}
    assert merged == {("ties", 0.2), ("ties", 0.8), ("della", 0.2), ("della", 0.8)}


def test_a_soup_over_a_pipelines_experts_in_hashed_dirs_via_from_runs(experts, tiny_xs, tmp_path):
    """teacher_pool.from_runs: the experts of another runs dir, made with other settings (hashed dirs,
    as a pipeline's are); the run records the model they descend from, not model.*'s default."""
    pipeline = tmp_path / "pipeline"
    for stage, path in zip(("stage1", "stage2"), experts):
        shutil.copytree(path, pipeline / f"rl/dapo/{stage}-0123abcd/hf")
        (pipeline / f"rl/dapo/{stage}-0123abcd/summary.json").write_text(json.dumps({"model": "tiny-xs"}))
    shutil.copytree(experts[1], pipeline / "rl/dapo/stage1-same1-0123abcd/hf")  # a control's tagged run: not a teacher
    runs = tmp_path / "runs"
    p = _train("consolidation=soup", "teacher_pool=two_experts", f"teacher_pool.from_runs={pipeline}",
               f"runs_dir={runs}", "logger=none", *SMALL_EVAL, f"hydra.run.dir={tmp_path / 'h'}")
    assert p.returncode == 0, p.stderr[-2000:]
    (where,) = (runs / "consolidation/soup").iterdir()
    merged = json.loads((where / "hf/merge.json").read_text())
    assert [str(e) for e in merged["experts"]] == [str(pipeline / f"rl/dapo/{s}-0123abcd/hf") for s in ("stage1", "stage2")]
    assert json.loads((where / "summary.json").read_text())["model"] == "tiny-xs"
    assert json.loads((where / "run.json").read_text())["identity"]["teacher_pool.from_runs"] == str(pipeline)
    # two runs of one group path there: which one is ambiguous, and said so in one line
    shutil.copytree(experts[0], pipeline / "rl/dapo/stage1-feedbeef/hf")
    p = _train("consolidation=soup", "teacher_pool=two_experts", f"teacher_pool.from_runs={pipeline}",
               f"runs_dir={runs}", "logger=none", *SMALL_EVAL, f"hydra.run.dir={tmp_path / 'h2'}")
    assert p.returncode == 2 and "teacher stage1 needs exactly one run at" in p.stderr
    assert "stage1-0123abcd, " in p.stderr and "Traceback" not in p.stderr


@pytest.mark.slow
def test_a_local_merge_sweep_over_a_pipelines_experts_includes_soup(experts, tiny_xs, tmp_path):
    """chorus.sweep runs a W&B sweep file offline (no account): soup and TIES over the experts a
    pipeline left in hashed dirs (teacher_pool.from_runs), best first by the sweep's eval/ metric."""
    import sys

    import yaml

    pipeline = tmp_path / "pipeline"
    shutil.copytree(tiny_xs, pipeline / "sft/stage0-0123abcd/hf")
    for stage, path in zip(("stage1", "stage2"), experts):
        shutil.copytree(path, pipeline / f"rl/dapo/{stage}-0123abcd/hf")
    sweep = yaml.safe_load((Path(__file__).resolve().parent.parent / "sweeps/merge_methods.yaml").read_text())
    sweep["parameters"] = {"experiment": {"values": ["merge/soup", "merge/ties_d0.5"]}}
    sweep["command"] = [c if c != "teacher_pool=three_experts" else "teacher_pool=two_experts" for c in sweep["command"]]
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(sweep))
    runs = tmp_path / "runs"
    p = subprocess.run([sys.executable, "-m", "chorus.sweep", str(tmp_path / "s.yaml"), f"teacher_pool.from_runs={pipeline}",
                        f"runs_dir={runs}", "logger=none", *SMALL_EVAL], capture_output=True, text=True, timeout=900,
                       env={k: v for k, v in os.environ.items() if k != "WANDB_API_KEY"})
    assert p.returncode == 0, p.stderr[-3000:]
    soup, ties = (next((runs / f"consolidation/{m}").glob("two_experts-local-*")) for m in ("soup", "ties"))
    assert json.loads((ties / "hf/merge.json").read_text())["base"] == str(pipeline / "sft/stage0-0123abcd/hf")
    rates = {d: json.loads((d / "summary.json").read_text())["pass_rate"] for d in (soup, ties)}
    shown = [line.split() for line in p.stdout.strip().splitlines()]
    assert [(float(m.split("=")[1]), s, d) for m, s, d in shown] == sorted(
        [(rates[d], "done", str(d)) for d in (soup, ties)], key=lambda r: -r[0])


@pytest.mark.parametrize("overrides, message", [
    (["consolidation=della", "consolidation.density=1.5"], "density must be in (0, 1]"),
    (["consolidation=soup", "consolidation.weights=[1,2,3]"], "3 merge weights for 2 experts"),
    pytest.param(["consolidation=dare", "consolidation.weights=[1,-1]"], "sum to 0 and a normalized merge divides",
                 marks=pytest.mark.slow),
    (["consolidation=ties", "teacher_pool=three_experts"], "1 of 3 teachers have no checkpoint: stage0 ("),
])
def test_cli_merge_bad_input_is_one_line(overrides, message, experts, tiny_xs, tmp_path):
    runs = _runs_dir(tmp_path / "runs", tiny_xs, experts)
    p = _train(*overrides, *([] if "teacher_pool" in overrides[-1] else ["teacher_pool=two_experts"]),
               f"runs_dir={runs}", *SMALL_EVAL, f"hydra.run.dir={tmp_path / 'h'}")
    assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr
    assert "sft job=rl sft_stage" not in p.stderr
    assert not list(runs.rglob("wandb")) and not list(runs.rglob("run.json"))  # refused before the logger starts


MERGEKIT = shutil.which("mergekit-yaml")


@pytest.mark.skipif(MERGEKIT is None, reason="mergekit is an optional extra (pip install mergekit); "
                                             "only this differential test uses it")
@pytest.mark.parametrize("method, mk_method, options", [("soup", "linear", {}), ("ties", "ties", {"density": 0.5}),
                                                        ("task_arithmetic", "task_arithmetic", {}),
                                                        ("task_arithmetic", "task_arithmetic", {"normalize": False})])
def test_agrees_with_mergekit_where_the_definitions_coincide(method, mk_method, options, experts, tiny_xs, tmp_path):
    import subprocess

    per_model = {k: v for k, v in options.items() if k != "normalize"}
    models = [{"model": str(e), "parameters": {"weight": 1.0, **per_model}} for e in experts]
    # chorus divides summed task vectors by the weights' sum unless consolidation.normalize=false
    cfg = {"merge_method": mk_method, "models": models, "dtype": "float32",
           "parameters": {"normalize": options.get("normalize", True)}}
    if method != "soup":
        cfg["base_model"] = str(tiny_xs)
    (tmp_path / "mk.yml").write_text(json.dumps(cfg))
    subprocess.run([MERGEKIT, str(tmp_path / "mk.yml"), str(tmp_path / "mk")], check=True, capture_output=True)
    ours = merge_checkpoints(method, experts, tmp_path / "ours", base=tiny_xs, **options)
    a = load_file(f"{ours['checkpoint']}/model.safetensors")
    b = {}
    for f in (tmp_path / "mk").glob("*.safetensors"):
        b.update(load_file(f))
    shared = set(a) & set(b)
    assert len(shared) >= len(a) - 1  # mergekit may write lm_head separately for tied embeddings
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in shared)
