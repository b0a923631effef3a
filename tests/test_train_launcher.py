"""chorus.train under a Hydra launcher plugin: hydra-submitit-launcher's local executor runs the job in
a process of its own (the config pickled over, HydraConfig rebuilt there), the way
hydra/launcher=submitit_slurm (conf/hydra/launcher/slurm_gpu.yaml) runs it on a SLURM node."""
import json
import subprocess
import sys

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from chorus.config.schema import CONF_DIR, register_configs
from chorus.train import auto_job, job_run_dir

# the cheapest chorus.train job that writes summary.json: a registered checkpoint, scored on one task
JOB = ["job=sft", "model.size=xs", "rl.eval_tasks.families=[counter]", "rl.eval_samples=1", "rl.max_new_tokens=8",
       "logger=none", "simulator.workers=1"]


@pytest.mark.slow
def test_a_multirun_through_submitit_leaves_the_run_dir_a_plain_run_leaves(tiny_xs, tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    runs = tmp_path / "runs"
    own = [*JOB, f"sft_stage.checkpoint={tiny_xs}", f"runs_dir={runs}"]
    # a sweep of two: per_family=4 scores, per_family=1 selects no held-out task (a job's one-line error)
    p = subprocess.run([sys.executable, "-m", "chorus.train", "-m", "hydra/launcher=submitit_local", *own,
                        "rl.eval_tasks.per_family=4,1", f"hydra.sweep.dir={tmp_path / 'sweep'}"],
                       capture_output=True, text=True, timeout=600)
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        c = OmegaConf.to_container(compose(config_name="train", overrides=[*own, "rl.eval_tasks.per_family=4"]),
                                   resolve=True, enum_to_str=True)
        planned, record = job_run_dir(c, auto_job(c))
    # the job that ran: its run dir is the one chorus.train names without a launcher, with its results
    assert list(runs.rglob("summary.json")) == [planned / "summary.json"], p.stderr[-3000:]
    summary = json.loads((planned / "summary.json").read_text())
    assert summary["job"] == "sft" and summary["model"] == "tiny-xs"
    assert len(pd.read_parquet(planned / "per_task.parquet")) == summary["n_samples"] > 0
    made = json.loads((planned / "run.json").read_text())
    assert made["identity"] == record["identity"]
    assert made["overrides"] == [*own, "rl.eval_tasks.per_family=4"]  # the job's own overrides, as typed
    assert (planned / ".hydra/config.yaml").exists() and (tmp_path / "sweep/0/.hydra/config.yaml").exists()
    # the failed job: its one-line error ends the launcher's report and is kept in its Hydra dir
    assert p.returncode != 0
    error = "chorus.train: error: rl.eval_tasks selects no tasks"
    assert p.stderr.strip().splitlines()[-1].startswith(error)
    assert (tmp_path / "sweep/1/error.txt").read_text().startswith("rl.eval_tasks selects no tasks")
