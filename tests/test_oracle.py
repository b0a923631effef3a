"""The cross-fitted oracle union, its null of identical experts and gap recovery beyond that null:
small cases against values worked out by hand, and simulations where the truth is known."""
import math

import numpy as np
import pandas as pd
import pytest

from chorus.analysis.oracle import cross_fitted_oracle, identical_experts_null, oracle_headroom, versus_best
from chorus.analysis.table import ORACLE, chorus_table


def tidy(samples: dict) -> pd.DataFrame:
    """{(run, task): [(passed, coverage), ...]} -> the tidy per-sample table."""
    return pd.DataFrame([{"run": run, "task_id": task, "sample": i, "passed": bool(p), "coverage": float(c)}
                         for (run, task), rows in samples.items() for i, (p, c) in enumerate(rows)])


def simulated(n_tasks: int, n_samples: int, rates, seed: int = 0) -> pd.DataFrame:
    """rates(run index, task index) -> pass probability; a pass covers 96, a fail 40 + noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(3):
        for t in range(n_tasks):
            for s in range(n_samples):
                ok = rng.random() < rates(r, t)
                rows.append({"run": f"e{r}", "task_id": f"t{t:03d}", "sample": s, "passed": ok,
                             "coverage": 96.0 if ok else 40.0 + 10 * rng.random()})
    return pd.DataFrame(rows)


# Two tasks, two runs, two samples (passed, coverage). With one sample per half, a split is which
# sample of each run goes to half A: 2 x 2 = 4 splits, all enumerated; swapping the halves gives the
# same 4, so each task's value is the mean over them of "the run best on A, scored on B".
HAND = tidy({("a", "x"): [(1, 90), (0, 10)], ("b", "x"): [(1, 60), (0, 40)],
             ("a", "y"): [(1, 80), (1, 80)], ("b", "y"): [(0, 100), (1, 0)]})


def test_hand_computed_cross_fitted_oracle():
    o = cross_fitted_oracle(HAND, ["a", "b"], k=2)
    assert o["splits"] == 4  # every split, exactly
    # Pass@1, task x: A-samples (a, b) = (1, 1): tie, mean of the B samples (0 + 0) / 2 = 0;
    #   (1, 0): a, its B 0; (0, 1): b, its B 0; (0, 0): tie, (1 + 1) / 2 = 1  -> 1/4 (in-sample: 1/2)
    # task y: a's A is always 1; b's A = 0: a, its B 1; b's A = 1: tie, (1 + 0) / 2  -> 3/4 (in-sample: 1)
    assert o["per_task"]["pass_at_1"].tolist() == pytest.approx([0.25, 0.75])
    assert o["pass_at_1"] == pytest.approx(0.5)
    # coverage, task x: A = (90, 60): a, its B 10; (90, 40): a, 10; (10, 60): b, 40; (10, 40): b, 60 -> 30
    # task y: b's A = 100: b, its B 0; b's A = 0: a (80), its B 80 -> 40. In-sample: 50 and 80.
    assert o["per_task"]["mean_coverage"].tolist() == pytest.approx([30.0, 40.0])
    assert o["mean_coverage"] == pytest.approx(35.0)
    # pass@2 needs 2 samples in each half: NaN, and the note says so
    assert math.isnan(o["pass_at_k"]) and "at least 4 per task" in o["notes"]["pass_at_k"]


def test_hand_computed_headroom_against_the_in_sample_oracle():
    h = oracle_headroom(HAND, ["a", "b"], n_boot=50, n_null=20)
    # best single: a = (1/2 + 1) / 2 = 3/4 (b: 1/2), coverage a = (50 + 80) / 2 = 65 (b: 50)
    assert h["best_single"] == "a" and h["best_single_pass_at_1"] == pytest.approx(0.75)
    assert h["best_single_mean_coverage"] == pytest.approx(65.0)
    assert h["in_sample_pass_at_1"] == pytest.approx(0.75)  # (1/2 + 1) / 2: in-sample headroom 0
    assert h["in_sample_mean_coverage"] == pytest.approx(65.0)  # (50 + 80) / 2
    assert h["headroom_pass_at_1"] == pytest.approx(-0.25) and h["headroom_mean_coverage"] == pytest.approx(-30.0)
    assert not h["beyond_null_pass_at_1"] and not h["beyond_null_mean_coverage"]


def test_one_run_scores_its_own_values_including_pass_at_k():
    # one run, 4 samples: the mean of B over all splits is the mean; pass@2 of B (a pair) averaged
    # over all pairs is the unbiased pass@2 of the 4 samples: 1 - C(3, 2) / C(4, 2) = 1/2
    t = tidy({("a", "x"): [(1, 96), (0, 40), (0, 50), (0, 60)]})
    o = cross_fitted_oracle(t, ["a"], k=2)
    assert o["pass_at_1"] == pytest.approx(0.25) and o["mean_coverage"] == pytest.approx(61.5)
    assert o["pass_at_k"] == pytest.approx(0.5) and not o["notes"]


def test_unequal_sample_counts_use_random_splits_and_keep_a_dominant_run():
    t = tidy({("a", "x"): [(1, 96)] * 3, ("b", "x"): [(0, 40)] * 4})
    o = cross_fitted_oracle(t, ["a", "b"], n_splits=30)
    assert o["splits"] == 30 and o["pass_at_1"] == 1.0 and o["mean_coverage"] == 96.0


def test_identical_experts_show_no_cross_fitted_headroom():
    """Three identical experts, 200 tasks, 4 samples: the in-sample oracle invents ~14 points of
    headroom; the cross-fitted one's is ~0 (less the best expert's small winner's curse, which the
    null carries too): its interval holds the null's mean and it is not beyond the null."""
    p = np.random.default_rng(1).random(200)
    t = simulated(200, 4, lambda r, i: p[i])
    h = oracle_headroom(t, ["e0", "e1", "e2"], n_boot=200, n_null=50)
    assert h["in_sample_pass_at_1"] - h["best_single_pass_at_1"] > 0.10
    null = h["null"]["pass_at_1"]
    lo, hi = h["headroom_pass_at_1_ci"]
    assert lo <= null["mean"] <= hi and h["headroom_pass_at_1"] < 0.02  # nothing invented (in-sample: > 10)
    assert -0.03 < null["mean"] <= 0 and 0 < null["sd"] < 0.03
    assert abs(h["headroom_pass_at_1"] - null["mean"]) < 3 * null["sd"]
    assert not h["beyond_null_pass_at_1"] and not h["beyond_null_mean_coverage"]


def test_the_chorus_table_oracle_row_is_cross_fitted():
    """The old table put the in-sample oracle (~14 points over the best of three identical experts) here."""
    p = np.random.default_rng(2).random(200)
    t = simulated(200, 4, lambda r, i: p[i], seed=2)
    runs = pd.DataFrame({"run": ["e0", "e1", "e2"], "job": "rl"})
    table = chorus_table(t, runs, k=2, n_boot=100).set_index("run")
    best = table.loc[["e0", "e1", "e2"], "pass_at_1"].max()
    assert abs(table.loc[ORACLE, "pass_at_1"] - best) < 0.03
    assert table.loc[ORACLE, "in_sample_pass_at_1"] - best > 0.10
    assert not table.loc[ORACLE, "beyond_null"] and not table.loc[ORACLE, "claimed"]


def test_complementary_experts_are_claimed_and_gap_recovery_is_a_bracket():
    # e0 solves the first 20 tasks, e1 the other 20 (e2 nothing), every sample: oracle 1, best 1/2
    t = simulated(40, 4, lambda r, i: float((r == 0 and i < 20) or (r == 1 and i >= 20)))
    h = oracle_headroom(t, ["e0", "e1", "e2"], n_boot=200, n_null=50)
    assert h["pass_at_1"] == 1.0 and h["best_single_pass_at_1"] == 0.5 and h["headroom_pass_at_1"] == 0.5
    assert h["headroom_pass_at_1_ci"][0] > 0 and h["claimed_pass_at_1"] and h["beyond_null_pass_at_1"]
    # a consolidated model passing 3/4 of every task: 3/4 - 1/2 against e0 (first of the tied e0, e1),
    # whose per-task values are 1 on half the tasks and 0 on the other: differences -1/4 and +3/4
    v = versus_best(np.full(40, 0.75), h, "pass_at_1", n_boot=200)
    assert v["delta"] == pytest.approx(0.25) and v["delta_ci"][0] < 0.25 < v["delta_ci"][1]
    # in-sample and cross-fitted oracles both 1 here (no noise): the bracket closes on 1/2
    assert v["recovery"] == pytest.approx((0.5, 0.5))
    unclaimed = {**h, "claimed_pass_at_1": False}
    w = versus_best(np.full(40, 0.75), unclaimed, "pass_at_1", n_boot=200)
    assert w["delta"] == v["delta"] and w["delta_ci"] == v["delta_ci"]  # the delta is reported regardless
    assert all(math.isnan(x) for x in w["recovery"])  # the ratio only where the headroom is claimed


def test_one_sample_per_task_is_undefined_not_in_sample():
    t = simulated(30, 1, lambda r, i: 0.5)
    o = cross_fitted_oracle(t, ["e0", "e1", "e2"], k=2)
    assert math.isnan(o["pass_at_1"]) and math.isnan(o["mean_coverage"]) and o["splits"] == 0
    assert "needs at least 2 samples per task and expert" in o["notes"]["pass_at_1"]
    assert "30 of 30 tasks" in o["notes"]["pass_at_1"]
    assert all(math.isnan(v["mean"]) for v in identical_experts_null(t, ["e0", "e1", "e2"], n_null=5).values())
    table = chorus_table(t.assign(run=t["run"]), pd.DataFrame({"run": ["e0", "e1", "e2"], "job": "rl"}),
                         n_boot=20).set_index("run")
    assert math.isnan(table.loc[ORACLE, "pass_at_1"]) and math.isnan(table.loc[ORACLE, "headroom"])
    assert "needs at least 2 samples" in table.loc[ORACLE, "oracle_notes"]


def test_the_true_gap_recovery_lies_between_the_in_sample_and_the_cross_fitted_ratios():
    """Each expert passes 0.8 of the samples on its third of the tasks and 0.2 elsewhere (true oracle
    0.8, best expert 0.4); a consolidated model passes 0.6 everywhere: true gap recovery 1/2. The
    in-sample oracle (too high) gives a lower ratio, the cross-fitted one (too low, being
    conservative) a higher one."""
    t = simulated(150, 4, lambda r, i: 0.8 if i % 3 == r else 0.2, seed=3)
    merged = simulated(150, 4, lambda r, i: 0.6, seed=4).query("run == 'e0'").assign(run="merged")
    runs = pd.DataFrame({"run": ["e0", "e1", "e2", "merged"], "job": ["rl"] * 3 + ["consolidation"]})
    table = chorus_table(pd.concat([t, merged]), runs, k=2, n_boot=100).set_index("run")
    oracle = table.loc[ORACLE]
    assert oracle["claimed"] and oracle["pass_at_1"] < 0.8 < oracle["in_sample_pass_at_1"]
    # with the observed Pass@1s, the ratio against the true oracle (0.8) lies between the two
    merged_p, best = table.loc["merged", "pass_at_1"], table.loc[["e0", "e1", "e2"], "pass_at_1"].max()
    truth = (merged_p - best) / (0.8 - best)
    assert 0.3 < truth < 0.7
    in_sample, cross_fitted = table.loc["merged", "gap_recovery_bracket"]
    assert in_sample < truth < cross_fitted
