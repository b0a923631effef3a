"""Study v2 end to end through files: synthetic seed dirs (controls.json of write_manifest, run dirs
with summary.json and per_task.parquet) through `python -m chorus.analyze study=[...]` to study.json,
the one-line refusals of bad evidence, and v1's kept seeds re-analysed."""
import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from chorus.analysis import patterns, study
from chorus.analysis.pooling import random_effects
from chorus.analysis.study_manifest import STAGES, keep_evidence, read_manifest
from chorus.analysis.study_verdict import analyse
from chorus.tracking.identity import flatten
from chorus.tracking.run_dir import PARQUET, write_summary
from study_fixtures import REVISION, write_seed, write_study

REPO = Path(__file__).resolve().parent.parent
KEPT_STUDY = REPO / "analysis/studies/staged"
Z95, Z90 = 1.959964, 1.644854  # the per-seed rows' normal quantiles (study.row)


def analyze(*args, cwd):
    return subprocess.run([sys.executable, "-m", "chorus.analyze", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def run_study(dirs, out: Path, *extra, cwd) -> dict:
    p = analyze(f"study=[{','.join(map(str, dirs))}]", f"out={out}", *extra, cwd=cwd)
    assert p.returncode == 0, p.stderr
    assert "| pattern_difference |" in p.stdout and str(out / "study.json") in p.stdout
    assert (out / "study.md").read_text() in p.stdout and (out / "study_rows.png").stat().st_size > 0
    return json.loads((out / "study.json").read_text())


def per_seed_variance(r: dict, z: float) -> float:
    return ((r["hi"] - r["lo"]) / (2 * z)) ** 2


def test_a_planted_stage_pattern_makes_the_claim_through_files(tmp_path):
    # 150 tasks x 8 samples, a stage pattern of sd 0.8 x (0.6, 1.0, 1.4) on the logit scale
    dirs = write_study(tmp_path / "study", stage_sd=0.8, seed=0, T=150)
    m = read_manifest(dirs[0])
    assert m.design == 2 and m.rl_seeds_distinct() and len(m.runs()) == 9 + 3 + 1 + 2 + 5
    res = run_study(dirs, tmp_path / "out", "bootstrap=200", cwd=tmp_path)
    names = ["seed0", "seed1", "seed2"]
    assert res["design"] == 2 and res["seeds"] == names and res["n_tasks"] == dict.fromkeys(names, 150)
    assert (res["revision"], res["machine"]) == (REVISION, "cpu-test")
    rows = res["rows"]
    for name in ("staged_headroom", "pattern_difference", "pattern_stage_share", "premise/stage0-stage1",
                 "premise/stage0-stage2", "premise/stage1-stage2", "staged_minus_same_headroom",
                 "staged_minus_same_adjusted", "positive_headroom", "positive_opd_vs_best", "staged_opd_vs_best",
                 "staged_soup_vs_best", "positive_opd_vs_self", "positive_opd_vs_random", "positive_opd_vs_no_gate",
                 "positive_opd_vs_soup", "staged_opd_vs_self", "staged_opd_vs_soup",
                 *(f"stage_mean/{s}" for s in STAGES)):
        r = rows[name]
        assert sorted(r["per_seed"]) == names, name
        for v in [*r["per_seed"].values(), r["pooled"]]:
            assert v["lo"] <= v["estimate"] <= v["hi"], name
        assert r["pooled"]["seeds"] == 3
        # the pooled row is the random-effects mean of the per-seed rows (variance read back from
        # their normal intervals; premise rows at 90 %)
        premise = name.startswith("premise/")
        z = Z90 if premise else Z95
        want = random_effects([v["estimate"] for v in r["per_seed"].values()],
                              [per_seed_variance(v, z) for v in r["per_seed"].values()], 0.10 if premise else 0.05)
        assert (r["pooled"]["estimate"], r["pooled"]["lo"], r["pooled"]["hi"]) == \
            pytest.approx((want.estimate, want.lo, want.hi), rel=1e-4, abs=1e-6), name
    # experts: stage x RL seed, labelled by their RL seed
    assert list(res["experts"]["seed1"]["stage2"]) == ["dapo/stage2 (seed 1020)", "dapo/stage2 (seed 1021)",
                                                       "dapo/stage2 (seed 1022)"]
    for n in names:  # a stage's mean is the mean of its experts' Pass@1
        for s in STAGES:
            assert rows[f"stage_mean/{s}"]["per_seed"][n]["estimate"] == \
                pytest.approx(np.mean(list(res["experts"][n][s].values())))
    t = res["tests"]
    assert set(t["pattern_p"]) == {*names, "pooled"}
    # every seed's observed split is its null's maximum (p = 1/280), so the pooled p is the sampled
    # path's floor, 1 / (N_DRAWS + 1)
    assert all(t["pattern_p"][n] == pytest.approx(1 / 280) for n in names)
    assert t["pattern_p"]["pooled"] == pytest.approx(1 / (patterns.N_DRAWS + 1))
    assert all(r["lo"] > 0 for r in rows["pattern_difference"]["per_seed"].values())
    # S scales with the stage pattern's variance (x 0.36, 1, 1.96 by seed): the seeds disagree far
    # beyond their noise, and the pooled random-effects row says so
    assert rows["pattern_difference"]["pooled"]["i2"] > 0.5
    # the positive control: each family expert at 0.85 on its third -> headroom far above 0; their
    # OPD at 0.6 everywhere beats the best family expert (~0.35) by ~25 points
    assert rows["positive_headroom"]["pooled"]["lo"] > 0 and t["holm"]["positive_headroom"]
    assert 15 < rows["positive_opd_vs_best"]["pooled"]["estimate"] < 35
    # OPD minus each control, paired over tasks: 0.6 against 0.5, 0.45, 0.55, 0.3 (sampling noise of
    # 150 x 8 samples: a few points); the staged OPD (the experts' max) against the same-level controls
    for kind, want in (("self", 10), ("random", 15), ("no_gate", 5), ("soup", 30)):
        assert abs(rows[f"positive_opd_vs_{kind}"]["pooled"]["estimate"] - want) < 4, kind
    assert rows["staged_opd_vs_self"]["pooled"]["lo"] > 0 and rows["staged_opd_vs_soup"]["pooled"]["lo"] > 0
    assert set(t["secondary_p"]) == set(study.SECONDARY) == set(t["holm"])
    # stages at one level (patterns centred): every pair of stage means equivalent within +-5 points
    for a, b in itertools.combinations(STAGES, 2):
        r = rows[f"premise/{a}-{b}"]["pooled"]
        assert -5 < r["lo"] and r["hi"] < 5
    assert rows["staged_headroom"]["pooled"]["lo"] > 0 and t["holm"]["staged_headroom"]
    assert res["verdict"] == {"premise": True, "primary": True, "staged_complementary": True, "claim": True,
                              "opd_consolidates": True}
    c = res["comparisons"]
    assert c["intervals_pooled"] == len(rows) and c["intervals_per_seed"] == 3 * len(rows)
    assert sum(c["claims"].values()) == 3 + 1 + len(study.SECONDARY) + 2


def test_opd_that_only_trains_more_does_not_consolidate(tmp_path):
    """The positive control's OPD at its own-teacher control's level (0.6 both): far above the best
    family expert, yet not consolidating: the bar needs it above the control too."""
    dirs = write_study(tmp_path / "study", stage_sd=0.8, seed=3, T=150, own_teacher=0.6)
    res = run_study(dirs, tmp_path / "out", "bootstrap=200", cwd=tmp_path)
    assert res["rows"]["positive_opd_vs_best"]["pooled"]["lo"] > 0
    assert res["rows"]["positive_opd_vs_self"]["pooled"]["lo"] < 0 < res["rows"]["positive_opd_vs_self"]["pooled"]["hi"]
    assert res["verdict"]["opd_consolidates"] is False


def test_no_stage_effect_fails_the_primary(tmp_path):
    dirs = write_study(tmp_path / "study", stage_sd=0.0, seed=1, controls=False)
    res = run_study(dirs, tmp_path / "out", "bootstrap=200", cwd=tmp_path)
    t, rows = res["tests"], res["rows"]
    assert t["pattern_p"]["pooled"] > 0.05 and not res["verdict"]["primary"] and not res["verdict"]["claim"]
    assert not {"positive_headroom", "positive_opd_vs_best", "staged_opd_vs_best"} & set(rows)
    assert set(t["secondary_p"]) == {"staged_headroom", "staged_minus_same_adjusted"}
    # without a stage effect the across-minus-within dissimilarity is 0 up to noise, and staged
    # triplets are no more complementary than same-stage ones (RL seeds alone give both headroom)
    for name in ("pattern_difference", "staged_minus_same_headroom"):
        assert rows[name]["pooled"]["lo"] < 0 < rows[name]["pooled"]["hi"], name
    assert rows["staged_headroom"]["pooled"]["lo"] > 0


@pytest.fixture
def small_study(tmp_path):
    """Three valid seed dirs, small (the refusals come before any statistics)."""
    rng = np.random.default_rng(5)
    return [write_seed(tmp_path / "study" / f"seed{k}", rng.uniform(0.2, 0.8, (12, 9)), rng, samples=2, seed=k)
            for k in range(3)]


def refused(dirs, tmp_path) -> str:
    p = analyze(f"study=[{','.join(map(str, dirs))}]", f"out={tmp_path / 'out'}", cwd=tmp_path)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, (p.returncode, p.stderr)
    assert lines[0].startswith("chorus.analyze: error: ") and not (tmp_path / "out/study.json").exists()
    return lines[0]


def set_summary(run: Path, **over):
    s = json.loads((run / "summary.json").read_text())
    write_summary(run, {**s, **over})


def test_a_missing_run_is_refused_in_one_line(small_study, tmp_path):
    shutil.rmtree(small_study[1] / "rl/dapo/stage1-r2")
    line = refused(small_study, tmp_path)
    assert f"run {small_study[1] / 'rl/dapo/stage1-r2'} is missing" in line and "seed1/controls.json" in line


def test_a_run_named_twice_among_the_experts_is_refused_in_one_line(small_study, tmp_path):
    manifest = small_study[0] / "controls.json"
    raw = json.loads(manifest.read_text())
    raw["experts"]["stage2"][1] = raw["experts"]["stage1"][0]  # one run posing as two experts
    manifest.write_text(json.dumps(raw))
    line = refused(small_study, tmp_path)
    assert f"run {small_study[0] / raw['experts']['stage1'][0]} is named twice among the experts" in line


def test_runs_of_two_revisions_are_refused_in_one_line(small_study, tmp_path):
    set_summary(small_study[0] / "rl/dapo/stage2-r1", git_revision="fedcba")
    line = refused(small_study, tmp_path)
    assert "mixed git revisions" in line and "stage0-r0: " + REVISION in line and "stage2-r1: fedcba" in line


def test_an_amended_role_may_come_from_another_revision_and_the_study_says_so(tmp_path):
    """study_amended=[families_opd]: that run alone may carry another revision (a pre-registered
    amendment re-ran it); study.json and study.md name it with its revision per seed. Any other
    run at another revision is still refused, and an amended role a seed does not run is refused."""
    rng = np.random.default_rng(6)
    seeds = [write_seed(tmp_path / "study" / f"seed{k}", rng.uniform(0.2, 0.8, (12, 9)), rng, samples=2, seed=k,
                        families=rng.uniform(0.2, 0.8, (12, 3)), families_opd=rng.uniform(0.2, 0.8, 12))
             for k in range(3)]
    for d in seeds:
        set_summary(d / "consolidation/opd/families", git_revision="abcdef1")
    assert "mixed git revisions" in refused(seeds, tmp_path)  # without the amendment: refused as before
    res = run_study(seeds, tmp_path / "out", "bootstrap=100", "study_amended=[families_opd]", cwd=tmp_path)
    assert res["revision"] == REVISION
    assert res["amended"] == {f"seed{k}": {"families_opd": "abcdef1"} for k in range(3)}
    assert "Amended (re-run at another revision, pre-registered): families_opd at `abcdef1`." in \
        (tmp_path / "out/study.md").read_text()
    set_summary(seeds[1] / "rl/dapo/stage2-r1", git_revision="fedcba")  # not amended: still refused
    p = analyze(f"study=[{','.join(map(str, seeds))}]", "study_amended=[families_opd]", cwd=tmp_path)
    assert p.returncode == 2 and "mixed git revisions" in p.stderr and "stage2-r1: fedcba" in p.stderr
    p = analyze(f"study=[{','.join(map(str, seeds))}]", "study_amended=[families/random]", cwd=tmp_path)
    assert p.returncode == 2 and "study_amended names ['families/random'], which this seed does not run" in p.stderr


def test_seeds_on_two_machine_kinds_are_refused_in_one_line(small_study, tmp_path):
    for run in (small_study[2] / "rl/dapo").iterdir():
        set_summary(run, machine="gpu-other")
    line = refused(small_study, tmp_path)
    assert "mixed machine kinds" in line and "seed0: cpu-test" in line and "seed2: gpu-other" in line


def test_a_seed_dir_without_controls_json_is_refused_in_one_line(small_study, tmp_path):
    (small_study[2] / "controls.json").unlink()
    line = refused(small_study, tmp_path)
    assert f"{small_study[2] / 'controls.json'}: " in line and "No such file" in line


def test_v1_and_v2_seed_dirs_are_not_mixed(small_study, tmp_path):
    runs = [f"rl/dapo/{s}-r0" for s in STAGES]
    (small_study[1] / "controls.json").write_text(json.dumps(
        {"staged": runs, "same_stage": [runs[2], "rl/dapo/stage2-r1", "rl/dapo/stage2-r2"]}))
    assert read_manifest(small_study[1]).design == 1
    line = refused(small_study, tmp_path)
    assert "mix study designs [1, 2]" in line


def test_two_seed_dirs_of_one_name_are_refused_in_one_line(small_study, tmp_path):
    other = tmp_path / "elsewhere" / "seed0"
    shutil.copytree(small_study[0], other)
    line = refused([small_study[0], other, small_study[1]], tmp_path)
    assert "share a name" in line and str(other) in line and str(small_study[0]) in line


# --- v1's kept evidence (analysis/studies/staged), re-analysed the v2 way ---

# Pass@1 % of the kept v1 runs (as docs/results.md's v1 table states them):
# the staged experts (stage0, stage1, stage2) and the same-stage control (stage2 and its two RL seeds)
KEPT = {"seed0": ([27.7, 25.4, 17.8], [17.8, 22.2, 18.0]),
        "seed1": ([25.9, 26.1, 32.0], [32.0, 33.5, 25.5]),
        "seed2": ([21.8, 26.5, 22.1], [22.1, 22.8, 22.1])}


@pytest.fixture(scope="module")
def v1():
    return analyse([str(KEPT_STUDY / s) for s in KEPT], n_boot=200)


def test_v1_is_reanalysed_as_design_1(v1):
    assert v1["design"] == 1 and v1["seeds"] == list(KEPT) and v1["machine"] == "unknown"
    assert v1["revision"].startswith("7651ca6")
    assert v1["notes"][0].startswith("design 1 (v1)") and "confounded" in v1["notes"][0]
    for n, (staged, same) in KEPT.items():
        e = v1["experts"][n]
        assert [len(e[s]) for s in STAGES] == [1, 1, 3]  # stage 2 and its two same-stage RL seeds
        assert [round(x, 1) for x in e["stage0"].values()] == [staged[0]]
        assert [round(x, 1) for x in e["stage1"].values()] == [staged[1]]
        assert [round(x, 1) for x in e["stage2"].values()] == same and same[0] == staged[2]
        rows = v1["rows"]
        assert rows["stage_mean/stage0"]["per_seed"][n]["estimate"] == pytest.approx(staged[0], abs=0.05)
        assert rows["stage_mean/stage1"]["per_seed"][n]["estimate"] == pytest.approx(staged[1], abs=0.05)
        # stage 2's mean is over its three RL seeds: seed0 (17.75 + 22.21 + 17.96) / 3 = 19.31
        assert rows["stage_mean/stage2"]["per_seed"][n]["estimate"] == pytest.approx(np.mean(same), abs=0.05)
        assert rows["premise/stage0-stage1"]["per_seed"][n]["estimate"] == \
            pytest.approx(staged[0] - staged[1], abs=0.1)
    assert v1["rows"]["stage_mean/stage2"]["per_seed"]["seed0"]["estimate"] == pytest.approx(
        (17.75 + 22.208333 + 17.958333) / 3)
    # v1's design: five experts (stage 2 thrice), ten splits a seed; pooled exactly over 10^3 products
    assert all(v1["tests"]["pattern_p"][n] in (0.1, 0.2, 0.3) for n in KEPT)
    assert v1["tests"]["pattern_p"]["pooled"] >= 1e-3
    assert not v1["verdict"]["premise"] and not v1["verdict"]["claim"]
    assert "staged_opd_vs_best" not in v1["rows"] and "positive_opd_vs_best" in v1["rows"]


def test_the_kept_copy_of_a_seed_gives_the_same_study(tmp_path):
    seed0 = KEPT_STUDY / "seed0"
    direct = run_study([seed0], tmp_path / "direct", "bootstrap=100", cwd=tmp_path)
    kept = run_study([seed0], tmp_path / "kept_out", "bootstrap=100", f"study_keep={tmp_path / 'kept'}", cwd=tmp_path)
    assert (tmp_path / "kept/seed0/controls.json").exists()
    assert kept["rows"] == direct["rows"] and kept["tests"] == direct["tests"]
    assert kept["verdict"] == direct["verdict"] and kept["experts"] == direct["experts"]
    # and in-process, through keep_evidence: the copy is checked and reads back identically
    files = keep_evidence(seed0, tmp_path / "again" / "seed0")
    assert len(files) == 2 * 9 + 1  # summary + per-task table of 9 runs, and controls.json
    again = analyse([str(tmp_path / "again" / "seed0")], n_boot=100)
    assert json.loads(json.dumps(again["rows"], default=float)) == direct["rows"]


def test_pool_secondary_p_does_not_depend_on_alpha():
    # a p-value is read back from the interval at the interval's own alpha: the same at 0.05 and 0.10
    seeds = []
    for k, (e, v) in enumerate([(2.0, 1.0), (3.0, 0.5), (1.0, 2.0)]):
        rows = {f"premise/{a}-{b}": study.row(0.1 * k, 1.0) for a, b in itertools.combinations(STAGES, 2)}
        rows.update({h: study.row(e + i, v) for i, h in enumerate(study.SECONDARY)})
        seeds.append({"rows": rows})
    p05, p10 = (study.pool(seeds, alpha)["tests"]["secondary_p"] for alpha in (0.05, 0.10))
    assert p05 == pytest.approx(p10)


def test_keep_evidence_copies_a_jsonl_only_run(small_study, tmp_path):
    # a run with per_task.jsonl and no parquet (read_table reads either): its table is kept too
    run = small_study[0] / "rl/dapo/stage1-r1"
    pd.read_parquet(run / PARQUET).to_json(run / "per_task.jsonl", orient="records", lines=True)
    (run / PARQUET).unlink()
    files = keep_evidence(small_study[0], tmp_path / "kept" / "seed0")
    assert tmp_path / "kept/seed0/rl/dapo/stage1-r1/per_task.jsonl" in files
    a, b = (analyse([str(d)], n_boot=20)["rows"] for d in (small_study[0], tmp_path / "kept" / "seed0"))
    assert a == b


def test_the_agentic_protocol_is_reported_per_stage_beside_the_direct_one(tmp_path):
    """Each stage's first expert evaluated again with feedback turns: its Pass@1, its gain over its
    own direct evaluation (paired over tasks) and the three's headroom, per seed and pooled; no claim
    rests on them. Planted: one feedback turn adds 0.2 to every task's rate of stage 1's expert only."""
    rng = np.random.default_rng(3)
    T = 80
    dirs = []
    for k in range(3):
        experts = np.full((T, 9), 0.3)
        agentic = np.full((T, 3), 0.3)
        agentic[:, 1] = 0.5
        dirs.append(write_seed(tmp_path / f"seed{k}", experts, rng, samples=8, seed=k, agentic=agentic))
    r = run_study(dirs, tmp_path / "out", cwd=tmp_path)
    rows = r["rows"]
    assert {"agentic/stage_mean/stage0", "agentic/gain/stage1", "agentic/staged_headroom"} <= set(rows)
    gain = rows["agentic/gain/stage1"]["pooled"]
    assert 15 < gain["estimate"] < 25 and gain["lo"] > 0  # +20 points, 80 tasks x 8 samples a seed
    still = rows["agentic/gain/stage0"]["pooled"]
    assert abs(still["estimate"]) < 5 and still["lo"] < 0 < still["hi"]
    assert not any(h.startswith("agentic") for h in r["tests"]["secondary_p"])  # reported, not claimed


def test_an_unknown_opd_control_is_refused_in_one_line(small_study, tmp_path):
    seed = small_study[0]
    raw = json.loads((seed / "controls.json").read_text())
    raw["opd_controls"] = {"staged/teacher_swap": raw["experts"]["stage0"][0]}
    (seed / "controls.json").write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=r"`opd_controls` names \['staged/teacher_swap'\]; use "):
        read_manifest(seed)


def test_pattern_matrix_by_hand(tmp_path):
    """Two tasks, deterministic passes (rates 0 or 1: no sampling noise to take out). Stage 0's
    experts pass task 0 only, stage 1's task 1 only, stage 2's both: centred patterns (+50, -50),
    (-50, +50) and (0, 0) points, so D is 100^2 between stages 0 and 1, 50^2 between stage 2 and
    either, 0 within a stage."""
    from chorus.analysis.study_verdict import pattern_matrix

    rates = np.array([[1.0] * 3 + [0.0] * 3 + [1.0] * 3, [0.0] * 3 + [1.0] * 3 + [1.0] * 3])
    seed = write_seed(tmp_path / "seed0", rates, np.random.default_rng(0), samples=2)
    d, stages = pattern_matrix(seed)
    assert stages == [s for s in STAGES for _ in range(3)]
    assert list(d.index) == list(d.columns) and len(d) == 9
    expected = np.array([[0, 1e4, 2500], [1e4, 0, 2500], [2500, 2500, 0]]).repeat(3, 0).repeat(3, 1)
    np.testing.assert_allclose(d.to_numpy(), expected, atol=1e-9)


def test_find_seed_dirs_keeps_folders_with_a_manifest_sorted_and_names_an_empty_glob(tmp_path):
    from chorus.analysis.study_manifest import MANIFEST, find_seed_dirs

    for name in ("seed1", "seed0", "notes"):
        (tmp_path / name).mkdir()
    for name in ("seed1", "seed0"):
        (tmp_path / name / MANIFEST).write_text("{}")
    assert find_seed_dirs(str(tmp_path / "*")) == [str(tmp_path / "seed0"), str(tmp_path / "seed1")]
    with pytest.raises(ValueError) as err:
        find_seed_dirs(str(tmp_path / "v2" / "seed*"))
    assert "\n" not in str(err.value) and "study_keep=" in str(err.value) and "v2/seed*" in str(err.value)


def test_the_secondary_claims_are_holm_at_one_sided_2_5_percent_hand_computed():
    """Three seeds agreeing exactly (q = 0, tau^2 = 0), each with variance 3: the pooled se is 1 and
    the one-sided p of an estimate t is t on 2 df's tail, 0.5 * (1 - t / sqrt(t^2 + 2)). H1 at 5.13:
    p = 0.01798, claimed alone (95 % lower bound 5.13 - 4.303 > 0) and under Holm at 5 % (second
    smallest <= 0.05 / 2), but not at the pre-registered one-sided 2.5 % (<= 0.025 / 2 = 0.0125)."""
    estimates = {"staged_headroom": 5.13, "staged_minus_same_adjusted": 1.0, "positive_headroom": 20.0}
    rows = {f"premise/{a}-{b}": study.row(0.0, 1.0, z=Z90) for a, b in itertools.combinations(STAGES, 2)}
    rows.update({h: study.row(e, 3.0) for h, e in estimates.items()})
    res = study.pool([{"rows": rows}] * 3)
    t = res["tests"]
    tail = {h: 0.5 * (1 - e / (e * e + 2) ** 0.5) for h, e in estimates.items()}
    assert t["secondary_p"] == pytest.approx(tail, rel=1e-6)
    assert t["secondary_p"]["staged_headroom"] == pytest.approx(0.01798, abs=1e-5)
    assert res["rows"]["staged_headroom"]["lo"] > 0
    assert t["holm_alpha"] == 0.025
    assert t["holm"] == {"positive_headroom": True, "staged_headroom": False, "staged_minus_same_adjusted": False}
    assert res["verdict"]["staged_complementary"] is False and res["verdict"]["premise"] is True


def _recomputed_equals_kept(root: Path, amended: tuple[str, ...] = ()) -> dict:
    """root/verdict/study.json recomputed from root/seed0..2 alone (the CLI's 1000 bootstrap
    resamples): every row, test and verdict leaf agrees with the kept one, which is returned."""
    kept = json.loads((root / "verdict/study.json").read_text())
    again = json.loads(json.dumps(analyse([str(root / f"seed{k}") for k in range(3)], n_boot=1000, amended=amended),
                                  default=float))
    assert again.get("amended") == kept.get("amended")
    for part in ("rows", "tests", "verdict", "experts", "comparisons"):
        got, want = flatten(again[part]), flatten(kept[part])  # leaf by leaf
        assert got.keys() == want.keys(), part
        for k, w in want.items():
            assert got[k] == (pytest.approx(w, rel=1e-9, abs=1e-12) if isinstance(w, float) else w), k
    assert (kept["revision"], kept["machine"]) == ("db39cd2967e62208707b96c5db6766d91e3d9ec3",
                                                   "x86_64, AMD EPYC, 2 CPUs, no GPU")
    return kept


def test_the_kept_v2_verdict_is_what_its_kept_seeds_give():
    """analysis/studies/v2/verdict/study.json is docs/results.md's v2 table."""
    v = _recomputed_equals_kept(REPO / "analysis/studies/v2")["verdict"]
    assert (v["premise"], v["primary"], v["staged_complementary"], v["claim"], v["opd_consolidates"]) == \
        (False, True, False, False, False)


def test_the_kept_opd_second_design_verdict_is_what_its_kept_seeds_give():
    """analysis/studies/v2/opd2/verdict/study.json, docs/results.md's "OPD's second design" result: the
    three kept worlds with the positive control's OPD re-run at the amendment's revision (named)."""
    kept = _recomputed_equals_kept(REPO / "analysis/studies/v2/opd2", amended=("families_opd",))
    assert kept["amended"] == {f"seed{k}": {"families_opd": "86ebd508630579e34e466fa2909b762178d50f95"}
                               for k in range(3)}
    v = kept["verdict"]
    assert (v["premise"], v["primary"], v["staged_complementary"], v["claim"], v["opd_consolidates"]) == \
        (False, True, False, False, False)


def test_the_kept_opd_third_design_verdict_is_what_its_kept_seeds_give():
    """analysis/studies/v2/opd3/verdict/study.json, docs/results.md's third-design result: the three kept
    worlds with the positive control's OPD re-run at the amendment's revision (named)."""
    kept = _recomputed_equals_kept(REPO / "analysis/studies/v2/opd3", amended=("families_opd",))
    assert kept["amended"] == {f"seed{k}": {"families_opd": "d41fbe45a449708991e0b5243708003d6619cd10"} for k in range(3)}
    v = kept["verdict"]
    assert (v["premise"], v["primary"], v["staged_complementary"], v["claim"], v["opd_consolidates"]) == \
        (False, True, False, False, False)


def _kept_samples(run: str) -> pd.DataFrame:
    """A kept validation run's per-sample table."""
    return pd.read_parquet(REPO / "analysis/studies/v2" / run / "per_task.parquet")


def _validation_pass1(run: str, family: str | None = None) -> pd.Series:
    """A kept validation run's Pass@1 per design (of `family` only, if given), in points."""
    df = _kept_samples(run)
    if family:
        df = df[df["family"] == family]
    return df.groupby("task_id")["passed"].mean() * 100


def test_opd_third_designs_validation_leads_are_what_its_kept_runs_give():
    """docs/results.md, "OPD's second to fourth designs": each variant's Pass@1 lead over the own-teacher
    control on the 171 validation designs of seeds 0 and 1, and the mean that chose routed=both."""
    own = {0: "opd2_validation/own_teacher", 1: "opd3_validation/seed1/own_teacher"}
    runs = {"second": {0: "opd2_validation/second_design", 1: "opd3_validation/seed1/second_design"},
            **{name: {k: f"opd3_validation/seed{k}/{d}" for k in (0, 1)}
               for name, d in (("rl", "routed_rl"), ("both", "routed_both"), ("cap0", "routed_both_cap0"))}}
    leads = {name: [float((_validation_pass1(r[k]) - _validation_pass1(own[k])).mean()) for k in (0, 1)]
             for name, r in runs.items()}
    assert {name: [round(v, 1) for v in pair] for name, pair in leads.items()} == \
        {"second": [7.6, -4.8], "rl": [2.6, -1.1], "both": [8.2, -1.9], "cap0": [5.4, -3.0]}
    means = {name: sum(v) / 2 for name, v in leads.items()}
    assert max(means, key=means.get) == "both"
    assert {name: round(m, 1) for name, m in means.items()} == {"second": 1.4, "rl": 0.8, "both": 3.2, "cap0": 1.2}
    assert all(len(_validation_pass1(r[k])) == 171 for r in runs.values() for k in (0, 1))
    # the noise check after the test runs: in each world each arm again with RL seed 5001
    for k, levels, lead in ((0, [46.4, 55.3], 8.6), (1, [56.6, 49.7], -4.4)):
        again = {a: _validation_pass1(f"opd3_validation/seed{k}/{a}_rlseed5001")
                 for a in ("own_teacher", "routed_both")}
        assert [round(float(v.mean()), 1) for v in again.values()] == levels
        both_runs = (again["routed_both"] + _validation_pass1(runs["both"][k])) / 2
        own_runs = (again["own_teacher"] + _validation_pass1(own[k])) / 2
        assert round(float((both_runs - own_runs).mean()), 1) == lead


def test_opd_fourth_designs_validation_rule_is_what_its_kept_runs_give():
    """docs/results.md, "OPD's fourth design on validation": two runs per arm per world (the pipeline's
    RL seed and 5001); the fourth design replaced the third because its mean lead over own-teacher,
    averaged over the two worlds, is above the third's (+2.4 against +2.1), and it is the study's."""
    own = {0: ["opd2_validation/own_teacher", "opd3_validation/seed0/own_teacher_rlseed5001"],
           1: ["opd3_validation/seed1/own_teacher", "opd3_validation/seed1/own_teacher_rlseed5001"]}
    arms = {"third": {k: [f"opd3_validation/seed{k}/routed_both", f"opd3_validation/seed{k}/routed_both_rlseed5001"]
                      for k in (0, 1)},
            "fourth": {k: [f"opd4_validation/seed{k}/gate_reference",
                           f"opd4_validation/seed{k}/gate_reference_rlseed5001"] for k in (0, 1)}}

    def two(runs):
        return sum(_validation_pass1(r) for r in runs) / 2

    assert [[round(float(_validation_pass1(r).mean()), 1) for r in arms["fourth"][k]] for k in (0, 1)] == \
        [[60.4, 51.9], [57.7, 46.8]]
    leads = {name: [float((two(runs[k]) - two(own[k])).mean()) for k in (0, 1)] for name, runs in arms.items()}
    assert {name: [round(v, 1) for v in pair] for name, pair in leads.items()} == \
        {"third": [8.6, -4.4], "fourth": [9.2, -4.5]}
    means = {name: sum(v) / 2 for name, v in leads.items()}
    assert round(means["fourth"], 1) == 2.4 and round(means["third"], 1) == 2.1 and means["fourth"] > means["third"]
    for k in (0, 1):
        summary = json.loads((REPO / "analysis/studies/v2" / arms["fourth"][k][0] / "summary.json").read_text())
        assert summary["gate_reference_lacks"] == 0 and summary["routing"] == "gated"
    study = (REPO / "conf/pipeline/study.yaml").read_text()
    assert "consolidation.gate_reference=stage0" in study


def test_opd_with_nothing_routed_is_its_own_teacher_control_and_any_route_costs_seed1s_counters():
    """docs/results.md, the fourth design's diagnostics in seed 1's world: OPD with nothing routed
    passes and fails every validation sample as the own-teacher control's run at the same RL seed;
    every arm that routes keeps fewer counters than the own-teacher run at its RL seed."""
    def table(run):
        return _kept_samples(run).sort_values(["task_id", "sample"]).reset_index(drop=True)

    opd, own = (table(r) for r in ("opd4_validation/seed1/nothing_routed_rlseed5001",
                                   "opd3_validation/seed1/own_teacher_rlseed5001"))
    assert len(opd) == 2736 and opd["task_id"].tolist() == own["task_id"].tolist()
    assert opd["passed"].tolist() == own["passed"].tolist()

    def counters(run):
        return round(float(_validation_pass1(run, "counter").mean()), 1)

    arms = {"nothing_routed": [87.9, 75.1], "no_teacher_samples": [67.8, 54.9], "routed_rl": [79.6, 59.7],
            "gate_reference": [74.6, 55.9]}
    for arm, want in arms.items():
        assert [counters(f"opd4_validation/seed1/{arm}{s}") for s in ("", "_rlseed5001")] == want, arm
    own_counters = [counters(f"opd3_validation/seed1/own_teacher{s}") for s in ("", "_rlseed5001")]
    assert own_counters == [87.1, 75.1]
    # at each RL seed, every arm that routes keeps fewer counters than own-teacher at that seed
    assert all(v < own for arm, pair in arms.items() if arm != "nothing_routed" for v, own in zip(pair, own_counters))
