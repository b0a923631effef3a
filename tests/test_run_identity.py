"""A run's identity: the settings that shaped it decide its dir, and settings a job would ignore are refused."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from chorus.config.schema import CONF_DIR, register_configs
from chorus.config.job_settings import unused_overrides
from chorus.config.run_identity import identity
from chorus.tracking.identity import check_reuse, differences, flatten, write_record
from chorus.train import auto_job, job_run_dir


@pytest.fixture(scope="module")
def train_cfg():
    """compose(*overrides) -> (composed dict, job, run dir, record), inside one Hydra context."""
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        def composed(*overrides):
            c = OmegaConf.to_container(compose(config_name="train", overrides=["runs_dir=/r", *overrides]),
                                       resolve=True, enum_to_str=True)
            job = auto_job(c)
            return (c, job, *job_run_dir(c, job))
        yield composed


def test_default_runs_keep_their_group_paths(train_cfg):

    assert train_cfg("job=sft", "sft_stage=stage1")[2] == Path("/r/sft/stage1")
    assert train_cfg("job=rl", "sft_stage=stage2", "rl_algo=grpo")[2] == Path("/r/rl/grpo/stage2")
    assert train_cfg("consolidation=ties", "teacher_pool=two_experts")[2] == Path("/r/consolidation/ties/two_experts")


def test_what_shapes_a_result_moves_the_dir_and_bookkeeping_does_not(train_cfg):
    base = train_cfg("consolidation=ties")[2]
    # where it logs, whether it resumes, how many simulator workers: the same run
    assert train_cfg("consolidation=ties", "logger=none", "rl.resume=false", "simulator.workers=1")[2] == base
    d2, d8 = (train_cfg("consolidation=ties", f"consolidation.density={d}")[2] for d in (0.2, 0.8))
    assert len({base, d2, d8}) == 3 and d2.parent == base.parent and d2.name.startswith("three_experts-")
    _, _, _, record = train_cfg("consolidation=ties", "consolidation.density=0.2")
    assert record["changed"] == {"consolidation.density": 0.2}
    # a setting only OPD reads is refused for a merge rather than hashed: each method's schema is its own
    with pytest.raises(Exception, match="Could not override 'consolidation.margin'"):
        train_cfg("consolidation=ties", "consolidation.margin=0.3")


def test_normalize_is_read_by_the_summing_merges_only(train_cfg):
    """TIES's disjoint mean has nothing to normalize: consolidation.normalize is refused there, and
    DARE's plain sum (normalize=false) is another run than its default weighted mean."""
    with pytest.raises(Exception, match="Could not override 'consolidation.normalize'"):
        train_cfg("consolidation=ties", "consolidation.normalize=false")
    c, job, mean_dir, _ = train_cfg("consolidation=dare")
    assert unused_overrides(job, c, ["consolidation.normalize=false"]) == []
    _, _, sum_dir, record = train_cfg("consolidation=dare", "consolidation.normalize=false")
    assert sum_dir != mean_dir and record["changed"] == {"consolidation.normalize": False}


def test_teacher_pools_follow_rl_algo(train_cfg):
    c, _, out, record = train_cfg("consolidation=opd", "rl_algo=grpo")
    assert [t["checkpoint"] for t in c["teacher_pool"]["teachers"]] == [f"/r/rl/grpo/stage{i}/hf" for i in range(3)]
    assert record["identity"]["teacher_pool.teachers.0.checkpoint"] == "${runs_dir}/rl/grpo/stage0/hf"
    assert out != train_cfg("consolidation=opd")[2]  # distilled from other experts: another run


def test_identity_is_relative_to_runs_dir_and_flat():
    c = {"runs_dir": "/a/b", "seed": 1, "format": {"name": "vectors"}, "simulator": {"workers": 2, "isolation": "off"},
         "model": {"name": "tiny", "path": "/a/b/sft/stage0/hf"}, "pass_coverage": None,
         "sft_stage": {"name": "stage0", "evaluate": False}, "logger": {"name": "none"}}
    assert identity("sft", c) == {"job": "sft", "format.name": "vectors", "model.name": "tiny",
                                  "model.path": "${runs_dir}/sft/stage0/hf", "pass_coverage": None, "seed": 1,
                                  "sft_stage.evaluate": False, "sft_stage.name": "stage0",
                                  "simulator.isolation": "off"}
    assert flatten({"t": [{"a": 1}, {"a": 2}], "l": [1, 2]}) == {"t.0.a": 1, "t.1.a": 2, "l": [1, 2]}
    # records without `changed` compare setting by setting; with it, only the non-default settings count
    assert differences({"identity": {"a": 1, "b": 2}}, {"identity": {"a": 1, "c": 3}}) == ["b: None -> 2", "c: 3 -> None"]
    assert differences({"identity": {"a": 1, "b": 2}, "changed": {"b": 2}},
                       {"identity": {"a": 5, "c": 3}, "changed": {}}) == ["b: None -> 2"]


def test_a_dir_made_with_other_settings_is_refused(tmp_path):
    write_record(tmp_path, {"identity": {"job": "rl", "rl.lr": 1e-4}})
    check_reuse(tmp_path, {"identity": {"job": "rl", "rl.lr": 1e-4}})  # the same run: resume
    with pytest.raises(ValueError, match=r"holds a run made with other settings \(rl.lr: 0.0001 -> 0.001\)"):
        check_reuse(tmp_path, {"identity": {"job": "rl", "rl.lr": 1e-3}})
    # a setting added to chorus since the run was made: its default is what that run had; another is not
    write_record(tmp_path, {"identity": {"job": "rl", "rl.lr": 1e-4, "rl.micro_batch": 8}, "changed": {"rl.lr": 1e-4}})
    added = {"job": "rl", "rl.lr": 1e-4, "model.pretrain_steps": 0, "rl.micro_batch": 8}
    assert check_reuse(tmp_path, {"identity": added, "changed": {"rl.lr": 1e-4}}) == []
    with pytest.raises(ValueError, match=r"model.pretrain_steps: None -> 600"):
        check_reuse(tmp_path, {"identity": {**added, "model.pretrain_steps": 600},
                               "changed": {"rl.lr": 1e-4, "model.pretrain_steps": 600}})
    with pytest.raises(ValueError, match=r"model.pretrain_steps: None -> 0"):  # no `changed`: strict
        check_reuse(tmp_path, {"identity": added})
    # a default that moved since (both runs at their revision's default): the same run, with a note
    moved = {**added, "rl.micro_batch": None}
    assert check_reuse(tmp_path, {"identity": moved, "changed": {"rl.lr": 1e-4}}) == ["rl.micro_batch: 8 -> None"]
    (tmp_path / "run.json").unlink()
    (tmp_path / "summary.json").write_text("{}")
    with pytest.raises(ValueError, match="without a run.json"):
        check_reuse(tmp_path, {"identity": {"job": "rl"}})


KEPT = json.loads((Path(__file__).parent / "data" / "run_records_aa9e127.json").read_text())
# Settings retired since aa9e127 that the old hash counted at their default value (the old rule hashed a
# key the default run does not read, kd_coef beside teacher_samples > 0, even at its default): the only
# names that change, once; docs/results.md names the revisions such runs were made at.
RENAMED = {"opd_design4": "consolidation.kd_coef"}


@pytest.mark.parametrize("case", sorted(KEPT))
def test_run_names_and_records_made_before_the_change_still_match(train_cfg, case):
    """Records written by revision aa9e127 (tests/data/run_records_aa9e127.json, before rl.micro_batch's
    default became auto and OPD's retired settings left the schema): the same overrides name the same
    dir now, and that dir's record is the same run (check_reuse accepts it, noting moved defaults)."""
    kept = KEPT[case]
    _, _, out, record = train_cfg(*kept["overrides"])
    if case in RENAMED:
        assert RENAMED[case] in kept["record"]["changed"] and out != Path(kept["dir"])
        assert {k: v for k, v in kept["record"]["changed"].items() if k != RENAMED[case]} == record["changed"]
        return
    assert str(out) == kept["dir"] and record["changed"] == kept["record"]["changed"]
    assert differences(record, kept["record"]) == []


def cli(module: str, *overrides, tmp_path):
    p = subprocess.run([sys.executable, "-m", module, *overrides, f"hydra.run.dir={tmp_path / 'h'}"],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "WANDB_MODE": "offline"})
    return p


# Every setting the review found accepted and ignored (or failing late) now stops at once, naming the key.
@pytest.mark.parametrize("module, overrides, message", [
    ("chorus.train", ["consolidation=ties", "+consolidation.densty=0.3"],
     "unknown setting consolidation.densty (did you mean consolidation.density?)"),
    ("chorus.train", ["consolidation=ties", "consolidation.epsilon=0.3"],
     "Could not override 'consolidation.epsilon'"),  # TiesConf lacks it: each method's schema is its own
    ("chorus.train", ["consolidation=opd", "rl_algo.eps_high=0.5"], "consolidation=opd does not use rl_algo.eps_high"),
    ("chorus.train", ["job=sft", "sft_stage.checkpoint=/some/model", "sft_stage.evaluate=false", "trainer=gpu"],
     "job=sft does not use trainer=gpu"),  # a registered, unevaluated checkpoint runs nothing
    ("chorus.train", ["job=sft", "sft_stage.evaluate=false", "model.dtype=bfloat16"],
     "job=sft does not use model.dtype=bfloat16 (SFT trains float32 weights"),
    ("chorus.train", ["job=rl", "consolidation.margin=0.2"], "Could not override 'consolidation.margin'"),
    ("chorus.train", ["consolidation=opd", "consolidation.mode=pgg"], "consolidation.mode"),
    ("chorus.train", ["job=rl", "rl.engine=vlm"], "rl.engine"),
    ("chorus.evaluate", ["simulator.isolation=requried"], "simulator.isolation"),
    ("chorus.evaluate", ["tasks=cvdp"], "tasks=cvdp needs tasks.path"),
    ("chorus.evaluate", ["model.size=xs"], "policy=reference does not use model.size=xs"),
    ("chorus.evaluate", ["policy=random", "policy.temperature=0.5"], "policy=random does not use policy.temperature"),
])
def test_ignored_settings_and_bad_modes_stop_before_anything_starts(module, overrides, message, tmp_path):
    p = cli(module, *overrides, f"runs_dir={tmp_path / 'runs'}" if module == "chorus.train" else "n_samples=1",
            tmp_path=tmp_path)
    assert p.returncode != 0 and "Traceback" not in p.stderr
    first = next(line for line in p.stderr.splitlines() if line.strip())
    assert message in first, p.stderr
    assert not list(tmp_path.rglob("wandb")) and not list(tmp_path.rglob("run.json"))  # no logger, no run dir


def test_sft_reads_the_trainer_it_trains_on(train_cfg):
    _, _, out, record = train_cfg("job=sft", "trainer=gpu")
    assert record["identity"]["trainer.accelerator"] == "gpu"
    assert out != train_cfg("job=sft")[2]  # trained on another trainer: another run
    # SFT trains float32 weights whatever model.dtype says; only the stage's evaluation reads it (on a GPU)
    assert record["identity"]["model.dtype"] == "float32"
    unevaluated = train_cfg("job=sft", "sft_stage.evaluate=false")[3]
    assert "model.dtype" not in unevaluated["identity"]


def test_train_refuses_a_dir_made_with_other_settings(train_cfg, tmp_path):
    """The same group path and hash but other settings: the defaults changed since that run was made."""
    runs = tmp_path / "runs"
    _, _, out, record = train_cfg(f"runs_dir={runs}", "job=sft")
    old = {**record["identity"], "sft_stage.steps": 7}
    write_record(out, {"identity": old})
    p = cli("chorus.train", "job=sft", f"runs_dir={runs}", "logger=none", tmp_path=tmp_path)
    assert p.returncode == 2 and "holds a run made with other settings (sft_stage.steps: 7 -> 200)" in p.stderr
    assert json.loads((out / "run.json").read_text())["identity"] == old  # left as it was


def test_a_missing_teacher_names_the_runs_of_its_group_path(tmp_path):
    from chorus.config.schema import Teacher
    from chorus.opd.teachers import check_teachers

    made = tmp_path / "rl/dapo/stage1-0123abcd/hf"
    made.mkdir(parents=True)
    (made / "config.json").write_text("{}")
    teachers = [Teacher("stage1", str(made)), Teacher("stage2", str(tmp_path / "rl/dapo/stage2/hf"))]
    with pytest.raises(ValueError, match=r"1 of 2 teachers have no checkpoint: stage2 \(.* pass "
                                         r"teacher_pool.teachers.1.checkpoint=<an existing"):
        check_teachers(teachers)
    teachers[1] = Teacher("stage1", str(tmp_path / "rl/dapo/stage1/hf"))
    with pytest.raises(ValueError, match=r"holds stage1-0123abcd \(made with other settings\); pass "
                                         r"teacher_pool.teachers.1.checkpoint=.*stage1-0123abcd/hf to use one"):
        check_teachers(teachers)


def test_every_missing_teacher_is_named_in_one_error_with_its_fix(tmp_path):
    from chorus.config.schema import Teacher
    from chorus.opd.teachers import check_teachers

    teachers = [Teacher(f"stage{i}", str(tmp_path / f"rl/dapo/stage{i}/hf")) for i in range(3)]
    with pytest.raises(ValueError) as err:
        check_teachers(teachers)
    message = str(err.value)
    assert "\n" not in message and message.startswith("3 of 3 teachers have no checkpoint: stage0 (")
    for i in range(3):
        assert f"`python -m chorus.train job=rl sft_stage=stage{i}`" in message
        assert f"teacher_pool.teachers.{i}.checkpoint=<an existing model>" in message
    assert "teacher_pool.from_runs=<its runs dir>" in message


def test_a_missing_stage_names_the_runs_of_its_group_path(tmp_path):
    from chorus.sft.stages import stage_checkpoint

    with pytest.raises(FileNotFoundError, match=r"run `python -m chorus.train job=sft sft_stage=stage0` first"):
        stage_checkpoint(tmp_path, "stage0")
    made = tmp_path / "sft/stage0-0123abcd/hf"
    made.mkdir(parents=True)
    (made / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"holds stage0-0123abcd \(made with other settings\): pass its "
                                                r"checkpoint, e.g. .*sft/stage0-0123abcd/hf \(sft_stage.checkpoint="):
        stage_checkpoint(tmp_path, "stage0")
