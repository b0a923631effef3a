"""`python -m chorus.<job> --help`: the job, each config group it uses with a description and its
options, its settings, how to see the whole config, an example; no schema entries."""
import subprocess
import sys

import pytest

from chorus.config.cli_help import CONF_DIR, GROUPS, description, job_groups, options

JOBS = ("train", "evaluate", "analyze", "pipeline")


def test_every_config_group_has_a_description():
    groups = {d.name for d in CONF_DIR.iterdir() if d.is_dir() and d.name != "hydra"}
    assert groups - set(GROUPS) == set(), "add a one-line description to chorus/config/cli_help.py GROUPS"


def test_an_options_description_is_the_first_sentence_of_its_comment(tmp_path):
    cases = {
        "# @package _global_\n# Merge preset: TIES at 0.2.\nfoo: 1\n": "Merge preset: TIES at 0.2.",
        "# Dr. GRPO: mean-centred advantages. Second sentence.\n": "Dr. GRPO: mean-centred advantages.",
        "# A model from the hub (downloaded on first use;\n# never in tests). More.\n":
            "A model from the hub (downloaded on first use; never in tests).",
        "# Official rows, e.g. tasks.path=x.jsonl\n# reference_dir: a folder.\n": "Official rows, e.g. tasks.path=x.jsonl",
        "defaults:\n  - x\n": "",
    }
    for i, (text, expected) in enumerate(cases.items()):
        (tmp_path / f"{i}.yaml").write_text(text)
        assert description(tmp_path / f"{i}.yaml") == expected


@pytest.mark.parametrize("job", JOBS)
def test_help_describes_the_jobs_groups_and_options_and_no_schema_entries(job):
    p = subprocess.run([sys.executable, "-m", f"chorus.{job}", "--help"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    text = p.stdout
    assert "_schema" not in text and "Powered by Hydra" not in text  # not Hydra's default help
    assert f"python -m chorus.{job}" in text.splitlines()[2]  # the module docstring's usage line
    used = [g for g, _ in job_groups(job)]
    for group in used:
        assert f"\n{group}: {GROUPS[group]}\n" in text
        for name, what in options(group).items():
            assert f" {name} " in text and what.split()[0] in text
    for group in set(GROUPS) - set(used):
        assert f"\n{group}: " not in text  # groups the job does not use stay out
    assert f"python -m chorus.{job} [overrides] --cfg job" in text and "== Examples ==" in text
    if job == "analyze":
        assert "runs=runs" in text and "bootstrap=1000" in text  # a job without groups lists its settings
