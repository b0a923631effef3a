"""Analysis functions against hand-computed values (see run_fixtures.py for the fixture's table)."""
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from run_fixtures import PASSES, TASKS, write_fixture_runs

from chorus.analysis.bootstrap import bootstrap_ci
from chorus.analysis.breakdown import breakdown
from chorus.analysis.complementarity import jaccard, jaccard_matrix, solved_sets, unique_solves, win_loss
from chorus.analysis.matrix import align_tasks, pass_at_k_matrix, task_matrix
from chorus.analysis.oracle import gap_recovery, oracle_union
from chorus.analysis.table import ORACLE, chorus_table, sft_delta_markdown, to_markdown
from chorus.tracking.runs import load_runs

EXPERTS = ["dapo/stage0", "dapo/stage1", "dapo/stage2"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return load_runs(str(write_fixture_runs(tmp_path_factory.mktemp("runs"))))


def matrix(columns: dict) -> pd.DataFrame:
    return pd.DataFrame(columns, index=[f"t{i}" for i in range(len(next(iter(columns.values()))))])


def test_per_task_pass_rates_and_pass_at_k(runs):
    P = task_matrix(runs.table, "passed")
    assert P["dapo/stage0"].tolist() == [1, 0.5, 0, 0, 0, 0]
    assert P.mean()["dapo/stage1"] == pytest.approx(2.5 / 6)
    # pass@2 from 2 samples: 1 if any sample passed
    K = pass_at_k_matrix(runs.table, 2)
    assert K["dapo/stage2"].tolist() == [0, 0, 1, 0, 1, 0]
    assert pass_at_k_matrix(runs.table, 3).isna().all().all()  # fewer than k samples: undefined


def test_solved_sets_jaccard_and_unique_solves(runs):
    sets = solved_sets(task_matrix(runs.table, "passed")[EXPERTS])
    assert sets == {"dapo/stage0": {"t0", "t1"}, "dapo/stage1": {"t0", "t2", "t3"}, "dapo/stage2": {"t2", "t4"}}
    J = jaccard_matrix(sets)
    assert J.loc["dapo/stage0", "dapo/stage1"] == pytest.approx(1 / 4)  # {t0} / {t0,t1,t2,t3}
    assert J.loc["dapo/stage0", "dapo/stage2"] == 0.0
    assert J.loc["dapo/stage1", "dapo/stage2"] == pytest.approx(1 / 4)
    assert np.diag(J).tolist() == [1.0, 1.0, 1.0]
    assert unique_solves(sets) == {"dapo/stage0": {"t1"}, "dapo/stage1": {"t3"}, "dapo/stage2": {"t4"}}
    # a stricter threshold: only tasks passed in every sample
    assert solved_sets(task_matrix(runs.table, "passed")[EXPERTS], min_rate=1.0)["dapo/stage1"] == {"t0", "t2"}


def test_jaccard_with_empty_sets():
    assert jaccard(set(), {"a"}) == 0.0
    assert math.isnan(jaccard(set(), set()))
    assert unique_solves({"a": set(), "b": {"x"}}) == {"a": set(), "b": {"x"}}


def test_win_loss_tie_counts():
    cov = matrix({"a": [90, 50, 10, 70], "b": [80, 50, 20, 70.5]})
    wl = win_loss(cov)
    assert wl["wins"].loc["a", "b"] == 1 and wl["losses"].loc["a", "b"] == 2 and wl["ties"].loc["a", "b"] == 1
    assert wl["wins"].loc["b", "a"] == 2 and wl["ties"].loc["a", "a"] == 4
    assert win_loss(cov, tol=1.0)["ties"].loc["a", "b"] == 2  # 70 vs 70.5 is now a tie


def test_oracle_union_and_gap_recovery(runs):
    P = task_matrix(runs.table, "passed")[EXPERTS]
    C = task_matrix(runs.table, "coverage")[EXPERTS]
    o = oracle_union(P, C, pass_at_k_matrix(runs.table, 2)[EXPERTS])
    assert o["pass_at_1"] == pytest.approx(4 / 6)
    assert o["best_single"] == "dapo/stage1" and o["best_single_pass_at_1"] == pytest.approx(2.5 / 6)
    assert o["headroom"] == pytest.approx(1.5 / 6)
    assert o["solved_union"] == pytest.approx(5 / 6)
    assert o["pass_at_k"] == pytest.approx(5 / 6)  # t5 never passes
    # coverage oracle: per task the best run's mean over samples (pass 96, fail 40 + 5i, t5's
    # second sample a compile error counted as 0)
    by_hand = [96, (96 + 45) / 2, 96, (96 + 55) / 2, 96, (65 + 0) / 2]
    assert o["mean_coverage"] == pytest.approx(sum(by_hand) / 6)
    assert gap_recovery(3.5 / 6, 2.5 / 6, 4 / 6) == pytest.approx(2 / 3)
    assert gap_recovery(1 / 6, 2.5 / 6, 4 / 6) == pytest.approx(-1.0)


def test_oracle_equal_to_the_best_run_has_no_headroom():
    P = matrix({"a": [1.0, 1.0, 0.0], "b": [1.0, 0.0, 0.0]})  # a solves a superset of b
    o = oracle_union(P)
    assert o["pass_at_1"] == o["best_single_pass_at_1"] == pytest.approx(2 / 3) and o["headroom"] == 0
    assert math.isnan(gap_recovery(2 / 3, o["best_single_pass_at_1"], o["pass_at_1"]))


def test_an_expert_that_solves_nothing():
    P = matrix({"empty": [0.0, 0.0], "b": [1.0, 0.0]})
    o = oracle_union(P)
    assert o["pass_at_1"] == 0.5 and o["best_single"] == "b" and o["solved_union"] == 0.5
    assert solved_sets(P)["empty"] == set()
    with pytest.raises(ValueError, match="at least one run"):
        oracle_union(P[[]])


def test_bootstrap_ci_brackets_the_mean_and_degenerates_cleanly():
    values = np.array([0.0, 1.0] * 50)
    lo, hi = bootstrap_ci(values, lambda m: m.mean(), n_boot=2000, seed=1)
    assert lo < 0.5 < hi and hi - lo < 0.3  # binomial sd of a mean of 100 = 0.05 -> width ~0.2
    assert bootstrap_ci(np.ones(7), lambda m: m.mean()) == (1.0, 1.0)  # no variance, no width
    assert all(math.isnan(x) for x in bootstrap_ci(np.array([]), lambda m: m.mean()))
    assert bootstrap_ci(values, lambda m: m.mean(), seed=3) == bootstrap_ci(values, lambda m: m.mean(), seed=3)


def test_every_bootstrap_resamples_the_one_default_count_unless_told():
    """chorus.analyze, the pipeline's report and every chorus.analysis function default to core.stats.N_BOOT,
    so the study notebook's analyse() gives the verdict the CLI kept; only the power simulation's claim, run
    per simulated data set, takes fewer (power.SIM_BOOT)."""
    import importlib
    import inspect
    import pkgutil

    import chorus.analysis
    from chorus.core.stats import N_BOOT
    from chorus.analysis.power import SIM_BOOT
    from chorus.config.schema import AnalyzeConf, PipelinePresetConf

    assert AnalyzeConf().bootstrap == PipelinePresetConf().bootstrap == N_BOOT > SIM_BOOT
    defaults = {}
    for info in pkgutil.iter_modules(chorus.analysis.__path__):
        module = importlib.import_module(f"chorus.analysis.{info.name}")
        for name, f in inspect.getmembers(module, inspect.isfunction):
            if f.__module__ == module.__name__ and "n_boot" in inspect.signature(f).parameters:
                defaults[f"{info.name}.{name}"] = inspect.signature(f).parameters["n_boot"].default
    assert "study_verdict.analyse" in defaults and "bootstrap.bootstrap_ci" in defaults
    assert {k: v for k, v in defaults.items() if v != N_BOOT} == {"power.claim_rate": SIM_BOOT}


def test_breakdown_by_difficulty(runs):
    b = breakdown(runs.table, "difficulty").set_index(["run", "difficulty"])
    assert b.loc[("dapo/stage1", "easy"), "pass_at_1"] == pytest.approx(2 / 3)  # 1, 0, 1
    assert b.loc[("dapo/stage1", "hard"), "pass_at_1"] == pytest.approx(0.5 / 3)
    assert b.loc[("dapo/stage2", "hard"), "n_tasks"] == 3
    with pytest.raises(ValueError, match="no 'vendor' column"):
        breakdown(runs.table, "vendor")


def test_chorus_table_rows_and_gap_recovery(runs):
    t = chorus_table(runs.table, runs.runs, k=2, n_boot=200).set_index("run")
    assert list(t.index[:4]) == [*EXPERTS, ORACLE]
    # the cross-fitted oracle (2 samples: each half is one sample, all 8 splits enumerated), per task:
    # t0 1 (stage0 and stage1 always pass); t1 1/6 (stage0's (1, 0): its chosen half passes -> it
    # scores the other, 0; it fails -> a three-way tie, (1 + 0 + 0) / 3); t2 3/4 (stage1 always 1;
    # stage2's (1, 0) ties it half the time: (1 + 0) / 2); t3 1/6 (as t1); t4 1; t5 0 -> 37/72
    assert t.loc[ORACLE, "pass_at_1"] == pytest.approx(37 / 72) and t.loc[ORACLE, "solved"] == 5
    assert t.loc[ORACLE, "in_sample_pass_at_1"] == pytest.approx(4 / 6)  # the old, optimistic oracle
    assert math.isnan(t.loc[ORACLE, "pass_at_2"])
    assert "pass@2 needs 2 samples in each half" in t.loc[ORACLE, "oracle_notes"]
    # 6 tasks: the headroom's lower bound is not above 0, so nothing is claimed and gap recovery is undefined
    assert not t.loc[ORACLE, "claimed"] and not t.loc[ORACLE, "claimed_coverage"]
    lo, hi = t.loc[ORACLE, "headroom_ci"]
    assert lo <= 0 and lo <= t.loc[ORACLE, "headroom"] <= hi
    # against the best expert (stage1: 1, 0, 1, .5, 0, 0), paired per task, reported all the same:
    # opd (1, .5, 1, .5, .5, 0) +1/6; ties (1, .5, 1, 0, 0, 0) 0; soup (1, 0, 0, 0, 0, 0) -1/4
    for run, delta in (("opd/three_experts", 1 / 6), ("ties/three_experts", 0.0), ("soup/three_experts", -0.25)):
        assert t.loc[run, "vs_best"] == pytest.approx(delta)
        assert t.loc[run, "vs_best_ci"][0] <= delta <= t.loc[run, "vs_best_ci"][1]
        assert all(math.isnan(x) for x in (*t.loc[run, "gap_recovery_bracket"],
                                           *t.loc[run, "gap_recovery_coverage_bracket"]))
    assert t.loc["dapo/stage0", "unique"] == 1 and t.loc["dapo/stage1", "pass_at_2"] == pytest.approx(0.5)
    lo, hi = t.loc["dapo/stage1", "pass_at_1_ci"]
    assert lo <= 2.5 / 6 <= hi
    md = to_markdown(t.reset_index())
    assert "| oracle union (experts) | oracle" in md and "66.7 [" in md


def test_runs_over_different_task_sets_compare_on_the_intersection(tmp_path):
    root = write_fixture_runs(tmp_path, {"rl/dapo/stage0": PASSES["rl/dapo/stage0"]})
    from run_fixtures import meta_for, rows_for
    from chorus.tracking.run_dir import write_run

    write_run(root / "rl/dapo/stage1", rows_for(PASSES["rl/dapo/stage1"][:4], TASKS[:4]), meta_for("rl/dapo/stage1"))
    runs = load_runs(str(root))
    with pytest.warns(UserWarning, match=r"dapo/stage0: 6, dapo/stage1: 4\); comparing them on the 4 tasks"):
        aligned = align_tasks(runs.table)
    assert set(aligned["task_id"]) == {"t0", "t1", "t2", "t3"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert chorus_table(runs.table, runs.runs, n_boot=10)["n_tasks"].eq(4).all()


def test_opd_routing_stats(runs):
    from chorus.analysis.routing import routing_stats, routing_table

    opd = runs.runs.set_index("run").loc["opd/three_experts", "path"]
    s = routing_stats(opd)
    assert s == {"decisions": 4, "steps": 2, "routed": 0.5, "skipped": 0.5,
                 "by_teacher": {"stage1": 0.25, "stage2": 0.25}, "skip_reasons": {"student_not_beaten": 0.5}}
    assert routing_stats(runs.runs.set_index("run").loc["ties/three_experts", "path"]) is None
    assert routing_table(runs.runs)["run"].tolist() == ["opd/three_experts"]


def test_gap_recovery_needs_headroom_above_noise_and_pass_can_be_rethresholded(runs):
    from chorus.tracking.runs import with_pass_rule

    assert math.isnan(gap_recovery(0.30, 0.326, 0.334, min_headroom=1 / 10))  # 0.8 points is not headroom
    assert gap_recovery(0.30, 0.2, 0.4, min_headroom=0.1) == pytest.approx(0.5)
    assert with_pass_rule(runs) is runs  # the fixture runs were made with the targets' rule
    t = with_pass_rule(runs, 70.0).table
    # stage2's t2 samples cover 96 and 50: one of two passes at 70 (as at the target), t5 never
    assert task_matrix(t, "passed").loc["t2", "dapo/stage2"] == 0.5
    assert task_matrix(with_pass_rule(runs, 40.0).table, "passed").loc["t0", "dapo/stage2"] == 1.0  # 40 >= 40


def test_runs_are_read_under_the_pass_rule_they_were_made_with(tmp_path):
    from chorus.tracking.runs import load_runs, with_pass_rule

    def rule(pass_coverage, runs=None):
        root = tmp_path / str(pass_coverage)
        write_fixture_runs(root, runs)
        for summary in root.rglob("summary.json"):  # as a job run with pass_coverage=... records it
            summary.write_text(json.dumps({**json.loads(summary.read_text()), "pass_coverage": pass_coverage}))
        return load_runs(str(root))

    at40 = with_pass_rule(rule(40.0))
    # dapo/stage2 fails t0 at coverage 40: a fail by its target, a pass by the recorded 40 % rule
    assert task_matrix(at40.table, "passed").loc["t0", "dapo/stage2"] == 1.0
    assert task_matrix(rule(None).table, "passed").loc["t0", "dapo/stage2"] == 0.0
    mixed = rule(40.0)
    mixed.runs.loc[mixed.runs["run"] == "dapo/stage0", "pass_coverage"] = None
    with pytest.raises(ValueError, match=r"different pass rules \(dapo/stage0: target; opd/three_experts: coverage >= 40 %\)"):
        with_pass_rule(mixed)
    assert task_matrix(with_pass_rule(mixed, 95.0).table, "passed").loc["t0", "dapo/stage2"] == 0.0


def cells(markdown: str) -> list[list[str]]:
    """The cells of each row of a markdown table (the header's too, not the |:--| rule)."""
    return [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in markdown.splitlines()
            if ln.startswith("| ")]


def tidy_samples(samples: dict) -> pd.DataFrame:
    """A tidy per-sample table from run -> task -> [(status, coverage), ...] (coverage 0 = none)."""
    return pd.DataFrame([{"run": run, "task_id": task, "sample": s, "status": status, "coverage": cov,
                          "passed": cov >= 80}
                         for run, tasks in samples.items() for task, ss in tasks.items()
                         for s, (status, cov) in enumerate(ss)])


# x and y write equally many valid samples (half) but y's cover more; z never writes one.
VALIDITY_SAMPLES = {
    "x": {"t0": [("ok", 80.0), ("compile_error", 0.0)], "t1": [("runtime_error", 30.0), ("empty", 0.0)],
          "t2": [("harness_error", 0.0), ("ok", 60.0)]},
    "y": {"t0": [("ok", 50.0), ("ok", 70.0)], "t1": [("rejected", 0.0), ("timeout", 20.0)],  # a timeout's kept coverage
          "t2": [("ok", 90.0), ("compile_error", 0.0)]},
    "z": {"t0": [("compile_error", 0.0)] * 2, "t1": [("empty", 0.0)] * 2, "t2": [("missing", 0.0)] * 2},
}


def test_validity_rate_and_coverage_over_valid_samples():
    from chorus.analysis.validity import validity_stats

    v = validity_stats(tidy_samples(VALIDITY_SAMPLES), n_boot=200)
    # x: one valid sample of two on every task (ok; runtime_error; ok beside a harness error)
    assert v["x"]["validity"] == pytest.approx(0.5) and v["x"]["harness_errors"] == 1
    assert v["x"]["coverage_valid"] == pytest.approx((80 + 30 + 60) / 3)
    # y: 2/2, 0/2 (rejected, timeout), 1/2 -> 0.5; the timeout's 20 % stays out of the valid mean
    assert v["y"]["validity"] == pytest.approx((1 + 0 + 0.5) / 3) and v["y"]["harness_errors"] == 0
    assert v["y"]["coverage_valid"] == pytest.approx((50 + 70 + 90) / 3)
    for run in ("x", "y"):
        for key in ("validity", "coverage_valid"):
            lo, hi = v[run][f"{key}_ci"]
            assert lo <= v[run][key] <= hi
    assert v["y"]["validity_ci"][0] < v["y"]["validity_ci"][1]  # y's tasks differ: the interval has width
    assert v["z"]["validity"] == 0 and math.isnan(v["z"]["coverage_valid"])
    assert all(math.isnan(x) for x in v["z"]["coverage_valid_ci"])
    no_status = validity_stats(tidy_samples(VALIDITY_SAMPLES).drop(columns="status"), n_boot=10)
    assert math.isnan(no_status["x"]["validity"])


def test_chorus_table_and_markdown_show_validity_beside_coverage():
    samples = {r: VALIDITY_SAMPLES[r] for r in ("x", "y")}
    runs = pd.DataFrame({"run": ["x", "y"], "job": ["rl", "consolidation"]})
    t = chorus_table(tidy_samples(samples), runs, k=1, n_boot=200).set_index("run")
    assert t.loc["x", "mean_coverage"] == pytest.approx((40 + 15 + 30) / 3)  # all samples, invalid ones as 0
    assert t.loc["y", "mean_coverage"] == pytest.approx((60 + 10 + 45) / 3)
    assert t.loc["x", "validity"] == pytest.approx(0.5) and t.loc["y", "coverage_valid"] == pytest.approx(70.0)
    assert math.isnan(t.loc[ORACLE, "validity"]) and math.isnan(t.loc[ORACLE, "coverage_valid"])
    md = to_markdown(t.reset_index())
    rows = cells(md)
    header, table = rows[0], {r[0]: dict(zip(rows[0], r)) for r in rows[1:]}
    assert header[4] == "mean coverage, all samples % [95% CI]"
    assert table["x"]["valid % [95% CI]"].startswith("50.0 [")
    assert table["x"]["mean coverage, valid samples % [95% CI]"].startswith("56.7 [")
    assert table["y"]["mean coverage, valid samples % [95% CI]"].startswith("70.0 [")
    assert table["x"]["harness errors"] == "1" and table["y"]["harness errors"] == "0"
    assert table[ORACLE]["valid % [95% CI]"] == "" and table[ORACLE]["harness errors"] == ""
    alone = pd.DataFrame({"run": ["y"], "job": ["rl"]})
    no_harness = to_markdown(chorus_table(tidy_samples({"y": samples["y"]}), alone, k=1, n_boot=10))
    assert "harness errors" not in no_harness  # the column appears only when some run had one


def test_report_states_validity(tmp_path):
    from chorus.analysis.report import write_report

    from chorus.tracking.record import run_metadata
    from chorus.tracking.run_dir import write_run
    from chorus.tracking.summary import summarize
    from run_fixtures import rows_for

    root = write_fixture_runs(tmp_path / "runs")
    sft = rows_for(PASSES["rl/dapo/stage1"])  # an SFT stage0 that did as well as dapo/stage1
    write_run(root / "sft/stage0", sft, {**summarize(sft), **run_metadata("sft", "tiny-s", 0, sft_stage="stage0")})
    report = Path(write_report(str(root), tmp_path / "out", n_boot=50)["path"]).read_text()
    assert "valid % [95% CI]" in report and "mean coverage, valid samples % [95% CI]" in report
    assert "status ok or runtime_error; a harness error counts as invalid" in report
    assert "Held-out tasks: 6 (easy, hard; families " in report and "), 2 samples each." in report  # not 2-2
    # every fixture run: 11 of 12 samples valid (t5's second is a compile error); OPD's valid samples
    # cover 7 x 96 + 45 + 55 + 60 + 65 = 897 over 11
    assert f"opd/three_experts 91.7 % / {897 / 11:.1f} %" in report
    assert "validity 0.0 points" in report
    # dapo/stage0 against it: Pass@1 1.5/6 - 2.5/6; coverage (728 - 810) / 12 (the samples' 96s and 40 + 5i)
    section = report.split("## Each expert against its own SFT start")[1].split("\n## ")[0]
    rows = {r[0]: r for r in cells(section) if r[0] in ("dapo/stage0", "dapo/stage1", "dapo/stage2")}
    assert list(rows) == ["dapo/stage0"] and rows["dapo/stage0"][1] == "sft/stage0"
    assert rows["dapo/stage0"][2].startswith(f"{-100 / 6:+.1f} [")
    assert rows["dapo/stage0"][3].startswith(f"{(728 - 810) / 12:+.1f} [")


def test_each_expert_against_its_own_sft_start():
    from chorus.analysis.sft_delta import sft_starts

    runs = pd.DataFrame([
        {"run": "sft/stage0", "job": "sft", "sft_stage": "stage0", "seed": 0},
        {"run": "dapo/stage0", "job": "rl", "sft_stage": "stage0", "seed": 0},
        {"run": "dapo/stage1", "job": "rl", "sft_stage": "stage1", "seed": 0},  # its SFT stage is not loaded
        {"run": "sft/stage2 (seed 0)", "job": "sft", "sft_stage": "stage2", "seed": 0},
        {"run": "sft/stage2 (seed 1)", "job": "sft", "sft_stage": "stage2", "seed": 1},
        {"run": "dapo/stage2", "job": "rl", "sft_stage": "stage2", "seed": 1},  # two stage2 SFT runs: its seed's
    ])
    assert sft_starts(runs) == {"dapo/stage0": "sft/stage0", "dapo/stage2": "sft/stage2 (seed 1)"}
    twins = runs.assign(seed=0)  # two stage2 SFT runs of its seed: no guess
    assert sft_starts(twins) == {"dapo/stage0": "sft/stage0"}

    cov = {"sft/stage0": [60, 20, 10, 0], "dapo/stage0": [70, 60, 10, 20], "dapo/stage1": [0, 90, 90, 90]}
    samples = {r: {f"t{i}": [("ok", float(c))] for i, c in enumerate(cs)} for r, cs in cov.items()}
    t = chorus_table(tidy_samples(samples), runs.iloc[:3], k=1, n_boot=300).set_index("run")
    # passes at >= 80 (tidy_samples): sft/stage0 none, dapo/stage0 none; coverage diffs 10, 40, 0, 20
    assert t.loc["dapo/stage0", "sft_start"] == "sft/stage0"
    assert t.loc["dapo/stage0", "delta_pass_at_1"] == 0
    assert t.loc["dapo/stage0", "delta_coverage"] == pytest.approx((10 + 40 + 0 + 20) / 4)
    lo, hi = t.loc["dapo/stage0", "delta_coverage_ci"]
    assert 0 <= lo < 17.5 < hi <= 40  # paired: every resampled task gains, so no interval below 0
    assert pd.isna(t.loc["dapo/stage1", "sft_start"]) and math.isnan(t.loc["dapo/stage1", "delta_coverage"])
    rows = cells(sft_delta_markdown(t.reset_index()))
    assert rows[1:] == [["dapo/stage0", "sft/stage0", "+0.0 [+0.0, +0.0]", f"+17.5 [{lo:+.1f}, {hi:+.1f}]"]]
    assert sft_delta_markdown(chorus_table(tidy_samples(samples), runs.iloc[1:3], k=1, n_boot=10)) == ""


def test_every_run_against_uniform_random_stimulus_paired_over_tasks():
    from chorus.analysis.table import random_delta_markdown

    runs = pd.DataFrame([{"run": "dapo/stage0", "job": "rl", "policy": None},
                         {"run": "random stimulus", "job": "evaluate", "policy": "random"},
                         {"run": "opd/three_experts", "job": "consolidation", "policy": None}])
    cov = {"dapo/stage0": [70, 60, 10, 20], "random stimulus": [75, 70, 50, 60], "opd/three_experts": [90, 80, 60, 70]}
    samples = {r: {f"t{i}": [("ok", float(c))] for i, c in enumerate(cs)} for r, cs in cov.items()}
    t = chorus_table(tidy_samples(samples), runs, k=1, n_boot=300).set_index("run")
    # coverage differences: dapo -5, -10, -40, -40 (mean -23.75); opd +15, +10, +10, +10 (mean +11.25)
    assert t.loc["dapo/stage0", "vs_random_coverage"] == pytest.approx(-23.75)
    assert t.loc["opd/three_experts", "vs_random_coverage"] == pytest.approx(11.25)
    assert t.loc["opd/three_experts", "vs_random_pass_at_1"] == pytest.approx(0.5)  # passes at >= 80: t0, t1 of 4 vs none
    lo, hi = t.loc["opd/three_experts", "vs_random_coverage_ci"]
    assert 10 <= lo < 11.25 < hi <= 15  # every task gains, so the paired interval stays above 0
    assert pd.isna(t.loc["random stimulus", "vs_random_coverage"])
    rows = cells(random_delta_markdown(t.reset_index()))
    assert [r[0] for r in rows[1:]] == ["dapo/stage0", "opd/three_experts"]
    # two random runs loaded, or none: no guess, no section
    twice = pd.concat([runs, pd.DataFrame([{"run": "r2", "job": "evaluate", "policy": "random"}])])
    samples["r2"] = samples["random stimulus"]
    assert random_delta_markdown(chorus_table(tidy_samples(samples), twice, k=1, n_boot=10)) == ""


def test_findings_name_runs_without_a_valid_sample_and_harness_errors():
    from chorus.analysis.report import findings

    samples = {r: VALIDITY_SAMPLES[r] for r in ("x", "z")}
    runs = pd.DataFrame({"run": ["x", "z"], "job": ["rl", "rl"]})
    said = findings(chorus_table(tidy_samples(samples), runs, k=1, n_boot=10), routing=pd.DataFrame())
    lines = [s for s in said if s.startswith(("Valid samples", "Harness errors"))]  # after the experts' sentences
    assert "x 50.0 % / 56.7 %, z 0.0 % / no valid sample." in lines[0] and "nan" not in lines[0]
    assert f"spans {(40 + 15 + 30) / 3:.1f} points, over valid samples 0.0 points, and validity 50.0 points" in lines[0]
    assert lines[1].startswith("Harness errors (chorus's failures, not the model's): x 1 samples")


def test_the_steps_table_splits_each_step_s_minutes_by_its_recorded_timing(tmp_path):
    from chorus.analysis.report import steps_markdown, steps_table

    for name, timing in (("a", {"generation_s": 60.0, "simulation_wait_s": 30.0, "training_s": 120.0}),
                         ("b", {"simulation_wait_s": 6.0})):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps({"timing": timing}))
    steps = [{"name": "rl/a", "status": "done", "seconds": 300.0, "run_dir": str(tmp_path / "a")},
             {"name": "baseline/b", "status": "done", "seconds": 12.0, "run_dir": str(tmp_path / "b")},
             {"name": "old/c", "status": "skipped (done)", "seconds": 0.0, "run_dir": str(tmp_path / "c")}]
    table = steps_table(steps).set_index("step")
    assert table.loc["rl/a", ["minutes", "generation", "simulation wait", "training", "other"]].tolist() == \
        [5.0, 1.0, 0.5, 2.0, 1.5]
    assert table.loc["baseline/b", ["minutes", "generation", "simulation wait", "training", "other"]].tolist() == \
        [0.2, 0.0, 0.1, 0.0, 0.1]
    assert table.loc["old/c"].isna()[["generation", "other"]].all()  # no summary: nothing to split
    shown = steps_markdown(steps)
    assert "nan" not in shown
    assert [c.strip() for c in next(r for r in shown.splitlines() if "old/c" in r).split("|")[1:-1]][:7] == \
        ["old/c", "skipped (done)", "0", "-", "-", "-", "-"]


def test_busy_minutes_count_time_with_any_step_running_once():
    """Steps side by side count once; a gap (a stopped, resumed pipeline) not at all; a step that never
    ran (no start) adds nothing. Spans in seconds: [0, 600] and [300, 900] overlap -> 900; [2000, 2060]
    after a gap -> 960 s = 16.0 min."""
    from chorus.analysis.report import busy_minutes

    steps = [{"started": 0.0, "ended": 600.0}, {"started": 300.0, "ended": 900.0}, {"started": 400.0, "ended": 500.0},
             {"started": 2000.0, "ended": 2060.0}, {"status": "pending"}]
    assert busy_minutes(steps) == 16.0
    assert busy_minutes([]) == 0.0


def test_opd_is_compared_with_the_run_it_started_from(tmp_path):
    """An OPD run records the checkpoint its student started from; the table finds the loaded run that
    made it and gives the paired delta. Fixture (run_fixtures.py): OPD passes 1, .5, 1, .5, .5, 0; its
    student here is the stage-2 expert (0, 0, .5, 0, 1, 0): (1 + .5 + .5 + .5 - .5 + 0) / 6 = 2/6."""
    root = write_fixture_runs(tmp_path / "runs")
    opd = root / "consolidation/opd/three_experts"
    summary = json.loads((opd / "summary.json").read_text())
    summary["student"] = str(root / "rl/dapo/stage2/hf")
    (opd / "summary.json").write_text(json.dumps(summary))
    runs = load_runs(str(root))
    t = chorus_table(runs.table, runs.runs, k=2, n_boot=200).set_index("run")
    assert t.loc["opd/three_experts", "student_run"] == "dapo/stage2"
    assert t.loc["opd/three_experts", "vs_student"] == pytest.approx(2 / 6)
    lo, hi = t.loc["opd/three_experts", "vs_student_ci"]
    assert lo <= 2 / 6 <= hi
    assert pd.isna(t.loc["soup/three_experts"].get("student_run"))  # no student recorded: no comparison
    summary["student"] = str(opd / "student_soup")  # a soup made inside the OPD run: no loaded run made it
    (opd / "summary.json").write_text(json.dumps(summary))
    runs = load_runs(str(root))
    assert pd.isna(chorus_table(runs.table, runs.runs, k=2, n_boot=50).set_index("run")
                   .loc["opd/three_experts"].get("student_run"))


@pytest.mark.parametrize("levels, start", [
    ([0.0, 0.0, 0.0], "Premise untestable: no expert passes any held-out task"),
    ([1.0, 1.0, 1.0], "Premise untestable: every expert passes every held-out task"),
    ([0.40, 0.42, 0.44], "Premise met: every expert is within 5 Pass@1 points of the best (spread 4.0)."),
    ([0.25, 0.30, 0.42], "Premise not met: the experts' Pass@1 spans 17.0 points"),
])
def test_the_premise_sentence_names_the_degenerate_cases(levels, start):
    from chorus.analysis.report import premise

    assert premise(pd.DataFrame({"pass_at_1": levels})).startswith(start)


def test_a_reason_shared_by_two_metrics_is_noted_once():
    from chorus.analysis.table import oracle_columns

    why = "the cross-fitted oracle needs 2 samples per task and expert (fewest here: 1); undefined (NaN)"
    oracle = {"notes": {"pass_at_1": why, "mean_coverage": why}, "in_sample_pass_at_1": 0.5,
              "in_sample_mean_coverage": 50.0}
    nan = float("nan")
    for m in ("pass_at_1", "mean_coverage", "pass_at_k"):
        oracle.update({f"headroom_{m}": nan, f"headroom_{m}_ci": (nan, nan), f"null_headroom_{m}": nan,
                       f"null_headroom_{m}_interval": (nan, nan), f"claimed_{m}": False, f"beyond_null_{m}": False})
    assert oracle_columns(oracle)["oracle_notes"] == why


def test_an_agentic_run_that_stopped_at_its_pass_rule_is_scored_under_that_rule_only(tmp_path):
    """protocol.stop_at=pass left no later rounds for samples that passed at their targets: under a
    coverage rule their Pass@1 would be biased, so that is refused in one line; its own rule works."""
    from chorus.tracking.runs import load_runs, with_pass_rule

    write_fixture_runs(tmp_path)
    summary = next(p for p in tmp_path.rglob("summary.json") if "stage1" in str(p))
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "stop_at": "pass"}))
    runs = load_runs(str(tmp_path))
    assert with_pass_rule(runs) is runs
    with pytest.raises(ValueError) as err:
        with_pass_rule(runs, 70.0)
    assert "\n" not in str(err.value)
    assert "dapo/stage1 stopped its agentic rounds once a sample passed at its tasks' targets" in str(err.value)
    assert "protocol.stop_at=full" in str(err.value)
