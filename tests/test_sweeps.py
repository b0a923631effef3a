"""Sweep lint: every combination, formatted as the W&B agent formats it, composes as Hydra overrides."""
import re
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from chorus.config.schema import CONF_DIR, register_configs
from chorus.sweep_check import check_sweep, command_lines, main
from chorus.train import auto_job, job_run_dir

SWEEPS = sorted((Path(__file__).resolve().parent.parent / "sweeps").glob("*.yaml"))


def composed(sweep: dict, monkeypatch) -> list[dict]:
    """Each combination's composed config, with the run dir it would write (key `_dir`)."""
    monkeypatch.setenv("WANDB_RUN_ID", "r1")
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        configs = [OmegaConf.to_container(compose(config_name="train", overrides=line), resolve=True,
                                          enum_to_str=True) for line in command_lines(sweep)]
        return [{**c, "_dir": job_run_dir(c, auto_job(c))[0]} for c in configs]


@pytest.mark.parametrize("path", SWEEPS, ids=[p.name for p in SWEEPS])
def test_every_sweep_combination_composes(path):
    assert check_sweep(path) == []


def test_sweeps_cover_the_merge_methods_and_opd_settings(monkeypatch):
    names = {p.name for p in SWEEPS}
    assert {"merge_methods.yaml", "opd.yaml"} <= names
    merges = composed(yaml.safe_load((SWEEPS[0].parent / "merge_methods.yaml").read_text()), monkeypatch)
    cons = {(c["consolidation"]["name"], c["consolidation"].get("density")) for c in merges}  # soup has none
    assert {n for n, _ in cons} == {"soup", "task_arithmetic", "ties", "dare", "della"}
    assert {d for n, d in cons if n == "della"} == {0.2, 0.5, 0.8}
    assert {str(c["consolidation"]["weights"]) for c in merges} == {
        "None", "[0.5, 0.25, 0.25]", "[0.25, 0.5, 0.25]", "[0.25, 0.25, 0.5]"}
    # the default soup keeps the plain <pool>-<tag> dir; any other setting adds the hash of what differs
    assert merges[0]["_dir"] == Path("runs/consolidation/soup/three_experts-r1")
    assert re.fullmatch(r"three_experts-r1-[0-9a-f]{8}", merges[1]["_dir"].name)
    assert len({c["_dir"] for c in merges}) == len(merges)  # no two combinations share a run dir, whatever the tag
    opd = composed(yaml.safe_load((SWEEPS[0].parent / "opd.yaml").read_text()), monkeypatch)
    designs = {"opd/paper": (0, "distil", "skip"), "opd/design2": (4, "distil", "rl"), "opd/design3": (4, "both", "rl")}
    got = {(c["consolidation"]["margin"], c["consolidation"]["teacher_samples"], c["consolidation"]["routed"],
            c["consolidation"]["unrouted"]) for c in opd}
    assert got == {(m, *d) for m in (0.0, 0.05, 0.1, 0.2) for d in designs.values()}
    assert all(c["consolidation"]["name"] == "opd" and auto_job(c) == "consolidation" for c in opd)


def broken(tmp_path, **parameters) -> Path:
    sweep = yaml.safe_load((SWEEPS[0].parent / "opd.yaml").read_text())
    sweep["parameters"].update(parameters)
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(sweep))
    return path


def test_a_bare_null_value_fails(tmp_path, capsys):
    path = broken(tmp_path, **{"consolidation.weights": {"values": [None]}})
    problems = check_sweep(path)
    assert problems == ['broken.yaml: consolidation.weights=None is not a Hydra value; write the string "null" '
                        'in the sweep']
    assert main([str(path)]) == 1 and "write the string" in capsys.readouterr().err


def test_a_parameter_named_after_a_config_node_fails(tmp_path):
    (problem,) = check_sweep(broken(tmp_path, consolidation={"values": ["opd"]}))
    assert "parameter 'consolidation' is a config key" in problem


def test_a_setting_the_job_would_ignore_fails(tmp_path):
    (problem,) = check_sweep(broken(tmp_path, **{"rl_algo.eps_high": {"values": [0.3]}}))
    assert "consolidation=opd does not use rl_algo.eps_high=0.3" in problem


def test_a_misspelt_key_and_a_bad_command_fail(tmp_path):
    (problem,) = check_sweep(broken(tmp_path, **{"consolidation.marginn": {"values": [0.1]}}))
    assert "Could not override 'consolidation.marginn'" in problem
    sweep = yaml.safe_load((SWEEPS[0].parent / "opd.yaml").read_text())
    sweep["command"] = ["python", "chorus/train.py", "${args}"]
    (tmp_path / "cmd.yaml").write_text(yaml.safe_dump(sweep))
    assert "command must be" in check_sweep(tmp_path / "cmd.yaml")[0]


def test_a_sweep_optimising_a_training_metric_is_refused(tmp_path):
    sweep = yaml.safe_load((SWEEPS[0].parent / "opd.yaml").read_text())
    for bad in ("pass_rate", "train/reward_mean"):
        sweep["metric"]["name"] = bad
        (tmp_path / "s.yaml").write_text(yaml.safe_dump(sweep))
        (problem,) = check_sweep(tmp_path / "s.yaml")
        assert f"metric.name={bad!r} is not a held-out result" in problem


def test_the_local_runner_expands_grid_and_random_and_refuses_bayes():
    from chorus.sweep import planned_lines

    merges = yaml.safe_load((SWEEPS[0].parent / "merge_methods.yaml").read_text())
    grid = planned_lines(merges, None, 0)
    assert len(grid) == 12 * 4 and grid == command_lines(merges)  # as the agent formats them
    drawn = planned_lines({**merges, "method": "random"}, 5, seed=3)
    assert len(drawn) == 5 and all(line in grid for line in drawn)
    assert drawn == planned_lines({**merges, "method": "random"}, 5, seed=3)  # seeded
    ranged = planned_lines({**merges, "method": "random", "parameters": {"consolidation.density": {"min": 0.1, "max": 0.9}}},
                           20, seed=0)
    densities = [float(a.split("=")[1]) for line in ranged for a in line if a.startswith("consolidation.density=")]
    assert len(densities) == 20 and all(0.1 <= d <= 0.9 for d in densities) and len(set(densities)) == 20
    with pytest.raises(ValueError, match=r"method: bayes needs W&B's sweep server .* use one of \['grid', 'random'\]"):
        planned_lines({**merges, "method": "bayes"}, 5, 0)
    with pytest.raises(ValueError, match="say how many with count=<N>"):
        planned_lines({**merges, "method": "random"}, None, 0)


def test_the_local_runner_refuses_a_bad_override_before_any_run(tmp_path):
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "chorus.sweep", str(SWEEPS[0].parent / "opd.yaml"), "consolidation.mrgin=1",
                        f"runs_dir={tmp_path}"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and p.stderr.startswith("chorus.sweep: error: ") and "Traceback" not in p.stderr
    assert "mrgin" in p.stderr and not list(tmp_path.iterdir())
