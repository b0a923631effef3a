"""Measured per-task targets for generated designs (tasks/generated/targets.py) and the
train / validation / test split they are drawn from."""
import pytest

from chorus.sim.result import SimResult
from chorus.tasks import load_tasks
from chorus.tasks.generated import calibrate_targets, generate_task, generate_tasks
from chorus.tasks.generated import targets as targets_mod
from chorus.tasks.generated.targets import target_from


def test_target_is_a_third_of_the_way_from_random_to_the_reference():
    assert target_from(100.0, 70.0) == 80.0
    assert target_from(90.0, 60.3) == pytest.approx(70.2)  # 60.3 + 29.7/3 = 70.2, rounded down
    assert target_from(100.0, 99.5) == 100.0  # no hole beyond random: only the reference's coverage passes
    assert target_from(80.0, 85.0) == 80.0


def test_splits_are_disjoint_and_stable_as_the_list_grows():
    tasks = generate_tasks(seed=4, per_family=12, difficulty="medium", families=["alu"])
    by = {s: [t.meta["index"] for t in tasks if t.split == s] for s in ("train", "validation", "test")}
    assert by == {"train": [0, 1, 4, 5, 8, 9], "validation": [2, 6, 10], "test": [3, 7, 11]}
    longer = generate_tasks(seed=4, per_family=40, difficulty="medium", families=["alu"])
    assert [t.split for t in longer[:12]] == [t.split for t in tasks]


@pytest.mark.slow
def test_calibrated_target_lies_between_random_and_the_reference_and_is_cached(tmp_path, monkeypatch, caplog):
    import logging

    t = generate_task("fsm", 2, seed=3, difficulty="medium", with_reference_tb=False)
    with caplog.at_level(logging.INFO, logger="chorus.progress"):
        calibrate_targets([t], workers=1, cache_dir=str(tmp_path))
    shown = [r.getMessage() for r in caplog.records if r.name == "chorus.progress"]
    assert shown[-1] == "calibrating task targets 5/5, ETA 0s"  # its 5 simulations: the reference and 4 random
    cal = t.meta["calibration"]
    assert cal["strong"] == 100.0 and cal["random_runs"] == 4
    assert cal["random_mean"] <= cal["random_best"] < t.target < cal["strong"]
    assert t.target == target_from(cal["strong"], cal["random_best"])
    # the second time nothing is simulated: the measurement comes from the cache
    monkeypatch.setattr("chorus.sim.pool.evaluate_many", lambda *a, **k: pytest.fail("simulated again"))
    again = generate_task("fsm", 2, seed=3, difficulty="medium", with_reference_tb=False)
    calibrate_targets([again], workers=1, cache_dir=str(tmp_path))
    assert again.target == t.target and again.meta["calibration"] == cal


def test_a_failed_calibration_run_raises_rather_than_leaving_a_placeholder(tmp_path, monkeypatch):
    t = generate_task("counter", 0, seed=0, difficulty="easy", with_reference_tb=False)
    monkeypatch.setattr("chorus.sim.pool.evaluate_many",
                        lambda jobs, *a, **k: [SimResult("harness_error", "boom")] * len(jobs))
    with pytest.raises(RuntimeError, match="calibration run ended harness_error"):
        calibrate_targets([t], workers=1, cache_dir=str(tmp_path))


@pytest.mark.slow
def test_the_suite_loader_calibrates_only_the_split_it_returns(monkeypatch, tmp_path):
    monkeypatch.setenv("CHORUS_CACHE_DIR", str(tmp_path))
    seen = []
    real = targets_mod.calibrate_targets
    monkeypatch.setattr("chorus.tasks.generated.calibrate_targets", lambda ts, **k: seen.extend(ts) or real(ts, **k))
    tasks = load_tasks("generated", seed=2, per_family=4, difficulty="easy", families=["fsm", "alu"],
                       split="validation")
    assert [t.id for t in tasks] == ["gen_fsm_2_s2_easy", "gen_alu_2_s2_easy"] and seen == tasks
    assert all("calibration" in t.meta and t.target < t.meta["calibration"]["strong"] for t in tasks)
