"""Every job writes under runs/ (ignored by git), and the jobs of a multirun never share a dir."""
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from run_fixtures import write_fixture_runs

from chorus.config.schema import CONF_DIR, register_configs

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("job, run_dir", [("train", "runs/hydra/train/"), ("evaluate", "runs/evaluate/"),
                                          ("analyze", "runs/analyze/"), ("pipeline", "runs/pipeline/staged/seed0/")])
def test_each_job_writes_under_runs_and_a_multirun_job_gets_its_own_subdir(job, run_dir):
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        hydra = compose(config_name=job, return_hydra_config=True).hydra
        run, sweep = hydra.run.dir, hydra.sweep.dir
        subdir = OmegaConf.to_container(hydra.sweep)["subdir"]  # as written: job.num is set per job
    assert run.startswith(run_dir) and sweep.startswith("runs/")
    assert subdir == "${hydra.job.num}"


def test_runs_is_ignored_by_git():
    p = subprocess.run(["git", "check-ignore", "-q", "runs/evaluate/x/summary.json"], cwd=REPO)
    assert p.returncode == 0


def test_a_multirun_gives_each_job_its_own_dir(tmp_path):
    runs = write_fixture_runs(tmp_path / "fixture")
    p = subprocess.run([sys.executable, "-m", "chorus.analyze", "-m", f"runs={runs}", "bootstrap=20", "k=1,2"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    (sweep,) = (tmp_path / "runs/analyze").iterdir()
    assert sorted(d.name for d in sweep.iterdir() if d.is_dir()) == ["0", "1"]
    assert all((sweep / n / "table.md").exists() for n in ("0", "1"))
