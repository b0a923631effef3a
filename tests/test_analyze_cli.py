"""python -m chorus.analyze on fixture runs: the markdown table on stdout, the plots on disk."""
import json
import shutil
import subprocess
import sys

from run_fixtures import PASSES, TASKS, meta_for, rows_for, write_fixture_runs

from chorus.tracking.record import run_metadata
from chorus.tracking.run_dir import write_run
from chorus.tracking.summary import summarize


def analyze(*args, cwd):
    return subprocess.run([sys.executable, "-m", "chorus.analyze", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_analyze_prints_the_table_and_writes_the_plots(tmp_path):
    runs = write_fixture_runs(tmp_path / "runs")
    sft = rows_for(PASSES["rl/dapo/stage1"])  # dapo/stage0's SFT start, as good as dapo/stage1
    write_run(runs / "sft/stage0", sft, {**summarize(sft), **run_metadata("sft", "tiny-s", 0, sft_stage="stage0")})
    (runs / "rl/dapo/crashed").mkdir(parents=True)
    (runs / "rl/dapo/crashed/steps.jsonl").write_text('{"step": 1}\n')
    p = analyze(f"runs={runs}/**", f"out={tmp_path / 'out'}", "bootstrap=100", "k=2", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rows = [[c.strip() for c in ln.strip().strip("|").split("|")]
            for ln in p.stdout.splitlines() if ln.startswith("| ")]
    header, table = rows[0], {r[0]: dict(zip(rows[0], r)) for r in rows[1:]}
    assert header[3] == "Pass@1 % [95% CI]" and header[5] == "pass@2 %"
    oracle, opd = table["oracle union (experts)"], table["opd/three_experts"]
    # the cross-fitted oracle (tests/run_fixtures.py: 37/72); pass@2 cannot be cross-fitted from 2 samples
    assert oracle[header[3]].startswith("51.4 [") and oracle["pass@2 %"] == "" and oracle["solved"] == "5"
    # 6 tasks: the oracle's headroom is not claimed, so no gap recovery; the paired deltas against the
    # best expert (stage1) are reported all the same (tests/run_fixtures.py: opd +1/6, soup -1/4)
    recovery = "gap recovery % (Pass@1), in-sample to cross-fitted"
    assert opd[header[3]].startswith("58.3 [") and opd[recovery] == ""
    assert table["soup/three_experts"][recovery] == ""
    assert opd["Δ Pass@1 vs best expert, points"].startswith("+16.7 [")
    assert table["soup/three_experts"]["Δ Pass@1 vs best expert, points"].startswith("-25.0 [")
    headroom = next(r for r in rows if r[0] == "Pass@1")  # the second table: metric, headroom, claim, null
    assert headroom[2] == "not detected"
    assert next(r for r in rows if r[0] == "pass@2")[1:] == ["undefined"] * 3  # 2 samples: no halves of 2
    # 11 of 12 samples valid in every run (t5's second is a compile error); OPD's valid samples cover
    # 7 x 96 + 45 + 55 + 60 + 65 = 897 over 11, its 12 samples 897 over 12
    assert header[4] == "mean coverage, all samples % [95% CI]" and opd[header[4]].startswith(f"{897 / 12:.1f} [")
    assert opd["valid % [95% CI]"].startswith("91.7 [") and oracle["valid % [95% CI]"] == ""
    assert opd["mean coverage, valid samples % [95% CI]"].startswith(f"{897 / 11:.1f} [")
    assert "a harness error counts as invalid" in p.stdout
    delta = p.stdout.split("Each expert against its own SFT start")[1]
    assert f"| dapo/stage0 | sft/stage0  | {-100 / 6:+.1f} [" in delta  # Pass@1 1.5/6 - 2.5/6
    assert f"skipped {runs / 'rl/dapo/crashed'}: no per_task.parquet" in p.stderr
    for name in ("table.md", "table.csv", "complementarity.png", "chorus_table.png", "coverage_strips.png"):
        f = tmp_path / "out" / name
        assert f.exists() and f.stat().st_size > 100, name
    assert (tmp_path / "out/complementarity.png").read_bytes()[:4] == b"\x89PNG"


def test_analyze_bad_input_is_one_line(tmp_path):
    p = analyze(f"runs={tmp_path}/nowhere/*", cwd=tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().count("\n") == 0 and "matches no run dirs" in p.stderr
    write_fixture_runs(tmp_path / "runs", {"rl/dapo/stage0": PASSES["rl/dapo/stage0"]})
    p = analyze(f"runs={tmp_path / 'runs'}", "experts=[dapo/stage9]", cwd=tmp_path)
    assert p.returncode == 2 and "experts ['dapo/stage9'] are not among the loaded runs" in p.stderr


def test_analyze_warns_when_task_sets_differ(tmp_path):
    runs = write_fixture_runs(tmp_path / "runs", {"rl/dapo/stage0": PASSES["rl/dapo/stage0"]})
    write_run(runs / "rl/dapo/stage1", rows_for(PASSES["rl/dapo/stage1"][:3], TASKS[:3]), meta_for("rl/dapo/stage1"))
    p = analyze(f"runs={runs}", f"out={tmp_path / 'out'}", "bootstrap=50", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "(dapo/stage0: 6, dapo/stage1: 3); comparing them on the 3 tasks all of them share" in p.stderr
    assert "2 runs, 3 common tasks" in p.stdout


def test_power_prints_the_minimum_detectable_headroom_of_a_design(tmp_path):
    p = analyze("power=true", "design.tasks=40", "design.samples=8", "design.levels=[0.3,0.5]", "design.hi=0.9",
                "design.lo=0.05", "design.sims=30", "runs=", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "design: 40 tasks x 8 samples, expert Pass@1 30.0, 50.0 %, two-level rates hi 0.90 / lo 0.05" in p.stdout
    last = p.stdout.strip().splitlines()[-1]
    assert last.startswith("minimum_detectable_headroom=") and "points at power 0.8" in last
    mde = float(last.split("=")[1].split()[0])
    curve = {float(ln.split()[1]): float(ln.split()[4]) for ln in p.stdout.splitlines() if ln.startswith("  headroom")}
    assert curve[mde] >= 0.8 and all(power < 0.8 for h, power in curve.items() if h < mde)
    # the design read from runs: the fixture's 6 tasks x 2 samples and its experts' levels
    runs = write_fixture_runs(tmp_path / "runs")
    p = analyze("power=true", f"runs={runs}/**", "design.sims=10", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "design: 6 tasks x 2 samples, expert Pass@1 25.0, 41.7, 25.0 %" in p.stdout
    # nothing to read a missing setting from: one line that names the fix
    p = analyze("power=true", "design.tasks=40", "runs=", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0
    assert "design.samples, design.levels" in p.stderr and "runs=" in p.stderr


def test_a_study_is_kept_small_and_moved_and_gives_the_same_verdict(tmp_path):
    seed_dir = write_fixture_runs(tmp_path / "runs/seed0")
    (seed_dir / "rl/dapo/stage0/hf").mkdir()
    (seed_dir / "rl/dapo/stage0/hf/model.safetensors").write_bytes(b"\0" * 1000)  # never kept
    staged = ["rl/dapo/stage0", "rl/dapo/stage1", "rl/dapo/stage2"]
    (seed_dir / "controls.json").write_text(json.dumps({"staged": staged}))  # relative to the seed dir
    first = analyze("study=[runs/seed0]", "bootstrap=200", "out=runs/seed0/analyze", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    kept = analyze("study=[runs/seed0]", "study_keep=kept", "bootstrap=200", cwd=tmp_path)
    assert kept.returncode == 0, kept.stderr
    assert "kept 7 files of runs/seed0 in kept/seed0" in kept.stdout  # 3 summaries, 3 tables, controls.json
    assert sorted(str(p.relative_to(tmp_path / "kept/seed0")) for p in (tmp_path / "kept/seed0").rglob("*.*")) == [
        "controls.json", *(f"{r}/{f}" for r in staged for f in ("per_task.parquet", "summary.json"))]
    shutil.rmtree(tmp_path / "runs")  # the copy stands alone: same table, its own dir named
    again = analyze("study=[kept/seed0]", "bootstrap=200", "out=runs/seed0/analyze", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout.replace("kept/seed0", "runs/seed0") == first.stdout
    # stage0 1.5/6 minus stage1 2.5/6 passes; headroom: cross-fitted 37/72 minus 2.5/6 (tests/run_fixtures.py)
    assert "| premise/stage0-stage1 | -16.7 [" in first.stdout and "| staged_headroom | +9.7 [" in first.stdout
    assert "no stage has three RL seeds: no same-stage triplet" in first.stdout  # v1's file, staged only
    assert json.loads((tmp_path / "runs/seed0/analyze/study.json").read_text())["design"] == 1


def test_a_run_outside_the_seed_dir_is_not_kept(tmp_path):
    write_fixture_runs(tmp_path / "runs/seed0")
    (tmp_path / "runs/seed0/rl/dapo/stage0").rename(tmp_path / "runs/stage0")
    staged = ["../stage0", "rl/dapo/stage1", "rl/dapo/stage2"]
    (tmp_path / "runs/seed0/controls.json").write_text(json.dumps({"staged": staged}))
    outside = analyze("study=[runs/seed0]", "study_keep=kept", cwd=tmp_path)
    assert outside.returncode == 2 and outside.stderr.count("\n") == 1 and "keep runs under it" in outside.stderr
