"""The analysis notebooks execute (nbmake) against fixture run dirs and show the hand-computed numbers; runs
that share no task stop them in one line. (tests/test_pipeline.py runs them over the smoke pipeline's folder.)"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from notebook_runner import errors, execute, outputs
from run_fixtures import meta_for, rows_for, write_fixture_runs

from chorus.tracking.run_dir import write_run
from chorus.tracking.summary import summarize

NOTEBOOKS = Path(__file__).resolve().parent.parent / "analysis"


def test_notebooks_run_on_fixture_runs_as_documented(tmp_path):
    """From the launch dir, with a relative CHORUS_RUNS, through a shell (which sets $PWD), as
    analysis/README.md says; the kernel itself starts in analysis/."""
    write_fixture_runs(tmp_path / "runs")
    (tmp_path / "analysis").mkdir()
    for nb in NOTEBOOKS.glob("*.ipynb"):
        shutil.copy(nb, tmp_path / "analysis" / nb.name)
    env = {k: v for k, v in os.environ.items() if k not in ("CHORUS_RUNS", "PWD")}
    p = subprocess.run(["bash", "-c", f"cd {tmp_path} && CHORUS_RUNS=runs {sys.executable} -m pytest -q --nbmake "
                        "--overwrite -p no:cacheprovider -o addopts= analysis/complementarity.ipynb "
                        "analysis/consolidation.ipynb"],
                       capture_output=True, text=True, timeout=600, env={**env, "MPLBACKEND": "Agg"})
    assert p.returncode == 0, p.stdout[-3000:]
    tmp_path = tmp_path / "analysis"
    comp = outputs(tmp_path / "complementarity.ipynb")
    assert "{'dapo/stage0': ['t1'], 'dapo/stage1': ['t3'], 'dapo/stage2': ['t4']}" in comp  # unique solves
    assert "'pass_at_1': 0.6667" in comp and "'solved_union': 0.8333" in comp  # the in-sample oracle union
    assert "'pass_at_1': 0.5139" in comp and "'claimed_pass_at_1': False" in comp  # cross-fitted: 37/72
    assert "<Figure" in comp
    cons = outputs(tmp_path / "consolidation.ipynb")
    assert "| oracle union (experts) | oracle" in cons and "51.4 [" in cons  # the CHORUS table, cross-fitted
    assert "not detected" in cons and "pass@2 needs 2 samples in each half" in cons  # the headroom's claim
    assert "opd/three_experts" in cons and "0.166667" in cons  # paired delta vs the best expert: +1/6
    assert "(nan, nan)" in cons  # 6 tasks: no claimed headroom, so no gap recovery bracket
    assert "student_not_beaten" in cons  # routing stats


def test_the_study_notebook_shows_the_cli_s_table_over_the_seeds_it_finds(tmp_path):
    """analysis/study.ipynb over a synthetic 3-seed study kept under kept/, found through a relative
    $CHORUS_STUDY glob from the launch dir: the same table as chorus.analyze, each expert's level as
    its per-task table says, the rows' plot and one pattern heatmap per seed."""
    import json

    import pandas as pd
    from chorus.analysis.study_verdict import analyse, markdown
    from study_fixtures import write_study

    dirs = write_study(tmp_path / "kept", stage_sd=0.8, seed=0, T=40)
    (tmp_path / "analysis").mkdir()
    shutil.copy(NOTEBOOKS / "study.ipynb", tmp_path / "analysis" / "study.ipynb")
    env = {k: v for k, v in os.environ.items() if k not in ("CHORUS_STUDY", "PWD")}
    p = subprocess.run(["bash", "-c", f"cd {tmp_path} && CHORUS_STUDY='kept/seed*' {sys.executable} -m pytest -q "
                        "--nbmake --overwrite -p no:cacheprovider -o addopts= analysis/study.ipynb"],
                       capture_output=True, text=True, timeout=600, env={**env, "MPLBACKEND": "Agg"})
    assert p.returncode == 0, p.stdout[-3000:]
    shown = outputs(tmp_path / "analysis" / "study.ipynb")
    assert markdown(analyse([str(d) for d in dirs])) in shown
    manifest = json.loads((dirs[1] / "controls.json").read_text())
    run = dirs[1] / manifest["experts"]["stage2"][1]
    level = 100 * pd.read_parquet(run / "per_task.parquet").groupby("task_id")["passed"].mean().mean()
    assert f"{level:.1f}" in shown  # seed1's second stage-2 expert, from its own table
    assert shown.count("<Figure") == 1 + len(dirs)


def test_experts_sharing_no_task_stop_the_notebook_in_one_line_naming_them(tmp_path):
    """Each expert scored on tasks of its own: the notebook says so in one line, not a traceback."""
    for i, rel in enumerate(("rl/dapo/stage0", "rl/dapo/stage1")):
        rows = rows_for([[1, 0], [0, 0]], [f"t{2 * i}", f"t{2 * i + 1}"])
        write_run(tmp_path / "runs" / rel, rows, {**summarize(rows), **meta_for(rel)})
    nb = execute(NOTEBOOKS / "complementarity.ipynb", {"CHORUS_RUNS": "runs"}, launch=tmp_path, expect_error=True)
    assert errors(nb) == ["NoSharedTasksError: the experts dapo/stage0 (2 tasks), dapo/stage1 (2 tasks) share no "
                          "task: there is nothing to compare them on; point at runs scored on the same tasks (or name "
                          "the experts to compare)"]
