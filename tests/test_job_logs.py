"""A job's terminal output says each thing once (Lightning's lines used to come out twice: through
its own handler and through Hydra's root handler; conf/hydra/job_logging/chorus.yaml)."""
import collections
import re
import subprocess
import sys

import pytest

# A logged line in Hydra's format ([time][logger][LEVEL] - message) or in Lightning's (LEVEL: message).
RECORD = re.compile(r"^(?:\[[^\]]*\]\[[^\]]*\]\[[A-Z]+\] - |(?:DEBUG|INFO|WARNING|ERROR|CRITICAL): )(?P<msg>.*)$")


def repeated_messages(output: str) -> dict:
    """Log messages printed more than once, whatever the format: per-step lines differ by their
    numbers, so an exact repeat is one record printed by two handlers."""
    messages = [m["msg"].strip() for m in map(RECORD.match, output.splitlines()) if m and m["msg"].strip()]
    return {msg: n for msg, n in collections.Counter(messages).items() if n > 1}


def test_repeated_messages_sees_one_record_through_two_handlers():
    twice = ("[2026-01-01 00:00:00,000][lightning.pytorch.utilities.rank_zero][INFO] - GPU available: False\n"
             "INFO: GPU available: False\n\n\nsft step 1/2 loss 6.9\nsft step 2/2 loss 6.8\n")
    assert repeated_messages(twice) == {"GPU available: False": 2}


@pytest.mark.slow
def test_a_training_job_prints_every_log_line_once(tmp_path):
    p = subprocess.run([sys.executable, "-m", "chorus.train", "job=sft", "sft_stage=stage0", "model.size=xs",
                        "sft_stage.steps=2", "sft_stage.evaluate=false", "sft_stage.tasks.per_family=1",
                        "sft_stage.tasks.families=[counter]", "logger=none", f"runs_dir={tmp_path}",
                        f"hydra.run.dir={tmp_path / 'hydra'}"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    output = p.stdout + p.stderr
    assert "sft step 2/2" in output and "sft data" in output  # chorus's lines shown
    # Lightning's banner, tip and fit-stopped lines say nothing a chorus user needs (tracking/quiet.py)
    assert not any(noise in output for noise in ("GPU available", "litlogger", "max_steps=2"))
    assert repeated_messages(output) == {}
