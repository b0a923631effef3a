"""Structured progress: the ETA arithmetic, the records a job writes and what the pipeline shows."""
import json

import pytest

from chorus.tracking.progress import Progress, describe, eta_seconds, format_duration, latest


def test_eta_is_the_pace_so_far_times_what_is_left():
    assert eta_seconds(3, 4, 90.0) == pytest.approx(30.0)  # 30 s per step, one left
    assert eta_seconds(4, 4, 90.0) == 0.0
    assert eta_seconds(0, 4, 10.0) is None  # no pace before the first unit
    assert [format_duration(s) for s in (None, 5, 65, 3725)] == ["?", "5s", "1m05s", "1h02m"]


def test_records_are_appended_and_the_newest_one_is_described(tmp_path):
    progress = Progress(tmp_path)
    progress.start("rl step", 4)
    progress.update("rl step", 1, 4)
    records = [json.loads(line) for line in (tmp_path / "progress.jsonl").read_text().splitlines()]
    assert [(r["phase"], r["done"], r["total"]) for r in records] == [("rl step", 0, 4), ("rl step", 1, 4)]
    newest = latest(tmp_path)
    assert newest == records[-1]
    # one step took 20 s, so three are left at that pace
    assert describe({**newest, "t0": 100.0, "t": 120.0}, now=120.0) == "rl step 1/4, ETA 1m00s"
    assert describe({**newest, "done": 4, "t0": 100.0}, now=120.0) == "rl step 4/4"  # finished: no ETA
    assert describe(None) == "" and latest(tmp_path / "nowhere") is None


def test_a_phase_nobody_started_is_paced_from_its_first_record(tmp_path, monkeypatch):
    clock = iter([100.0, 160.0])  # step 1 reported after minutes of set-up, step 2 a minute later
    monkeypatch.setattr("chorus.tracking.progress.time.time", lambda: next(clock))
    progress = Progress(tmp_path)
    progress.update("sft step", 1, 5)
    progress.update("sft step", 2, 5)
    # 3 steps left at 60 s each when step 2 was recorded; 30 s have passed since
    assert describe(latest(tmp_path), now=190.0) == "sft step 2/5, ETA 2m30s"
    assert describe(latest(tmp_path) | {"done": 1, "t": 100.0}, now=100.0) == "sft step 1/5, ETA ?"


def test_a_torn_last_line_falls_back_to_the_previous_record(tmp_path):
    Progress(tmp_path).update("held-out evaluation", 8, 16)
    with open(tmp_path / "progress.jsonl", "a") as f:
        f.write('{"phase": "held-out ev')  # a job killed mid-write
    assert latest(tmp_path)["done"] == 8


def test_without_a_run_dir_progress_only_logs(caplog):
    with caplog.at_level("INFO", logger="chorus.progress"):
        Progress(None).update("teacher rewards stage1", 2, 4)
    assert "teacher rewards stage1 2/4, ETA" in caplog.text
