"""A stage's data from a teacher model and as a dataset folder (sft/teacher.py, sft/dataset_folder.py):
the folder's rows and refusals, and a whole stage built from a real `transformers serve` teacher,
resumed from its request cache and trained on again from the folder."""
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from chorus.core.task import Task
from chorus.sft.data import Example
from chorus.sft.dataset_folder import INFO_FILE, read_dataset, write_dataset
from chorus.tasks import load_tasks
from helpers import AND2, PROMPT, Server

ROOT = Path(__file__).resolve().parents[1]


def _tasks(**splits):
    return [Task(id=k, spec="and", rtl={"and2.sv": AND2}, top="and2", instance="uut", split=v) for k, v in splits.items()]


def _example(task_id, kind="validated", **meta):
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": f"write for {task_id}"}]
    return Example(task_id, kind, msgs, "filename: stimulus.vec\n```vectors\nin0=1\n```\n", 75.0,
                   {"source": "teacher", "grade": "teacher:0", "sample": 0, "round": 0, "status": "ok",
                    "teacher_engine": "openai", "teacher_model": "m", "temperature": 0.7, **meta})


def test_dataset_folder_loads_with_datasets_and_keeps_provenance(tmp_path):
    datasets = pytest.importorskip("datasets")
    tasks = _tasks(a="train", b="train", c="test")
    examples = [_example("a"), _example("b", "repair", from_coverage=12.5, from_status="compile_error")]
    folder = write_dataset(examples, tasks, tmp_path / "data", "stage1", "abc123")
    rows = datasets.load_dataset("parquet", data_dir=str(folder))["train"]
    assert rows.num_rows == 2 and rows[0]["task_id"] == "a" and rows[0]["split"] == "train"
    assert rows[1]["messages"][1] == {"role": "user", "content": "write for b"}
    assert (rows[1]["kind"], rows[1]["from_coverage"], rows[1]["from_status"]) == ("repair", 12.5, "compile_error")
    assert (rows[0]["teacher_engine"], rows[0]["teacher_model"], rows[0]["temperature"]) == ("openai", "m", 0.7)
    assert rows[0]["stage"] == "stage1" and rows[0]["revision"] == "abc123"
    back = read_dataset(folder, tasks)
    assert [(e.task_id, e.kind, e.messages, e.completion, e.coverage) for e in back] == \
           [(e.task_id, e.kind, e.messages, e.completion, e.coverage) for e in examples]
    assert json.loads((folder / INFO_FILE).read_text())["kinds"] == {"validated": 1, "repair": 1}


def test_rows_of_unknown_or_non_training_tasks_are_refused(tmp_path):
    tasks = _tasks(a="train", c="test")
    with pytest.raises(ValueError, match="task 'c' is in the test split"):
        write_dataset([_example("a"), _example("c")], tasks, tmp_path / "data", "stage0")
    assert not (tmp_path / "data").exists() and not list(tmp_path.iterdir())  # nothing half-written
    folder = write_dataset([_example("a")], tasks, tmp_path / "data", "stage0")
    with pytest.raises(ValueError, match="task 'a' is in the validation split"):
        read_dataset(folder, _tasks(a="validation"))
    with pytest.raises(ValueError, match="task 'a' is not among sft_stage.tasks"):
        read_dataset(folder, _tasks(z="train"))
    (folder / INFO_FILE).unlink()  # as a writer killed before its last file leaves it
    with pytest.raises(ValueError, match="not a finished chorus SFT dataset"):
        read_dataset(folder, tasks)


@pytest.fixture(scope="module")
def burst_teacher(tiny_xs, tmp_path_factory) -> str:
    """The xs model taught one answer to every stage task's prompt, three times in four a random burst
    that runs and once a broken line: its samples at T=1 pass and fail (measured: 9 of 40 reach 50 %,
    18 do not compile), so a stage gets both validated answers and repairs."""
    from transformers import AutoTokenizer

    from chorus.policy.prompts import fit_messages
    from chorus.sft.data import answer
    from chorus.sft.run import train_sft

    tok, examples = AutoTokenizer.from_pretrained(tiny_xs), []
    for t in load_tasks("generated", split="train", difficulty="easy", per_family=2, seed=0):
        msgs = fit_messages(t, "vectors", tok, PROMPT)[0]
        examples += [Example(t.id, "validated", msgs, answer(t, "vectors", "rst x2\nin0=? x400"), 0.0)] * 3
        examples.append(Example(t.id, "validated", msgs, answer(t, "vectors", "rst x2\nin0="), 0.0))
    out = tmp_path_factory.mktemp("burst-teacher")
    return train_sft(str(tiny_xs), examples, out, steps=60, batch_size=8, lr=3e-3, warmup_steps=5)["checkpoint"]


def requests_received(log: Path) -> int:
    return log.read_text().count('"POST /v1/completions HTTP/1.1"')


def stage_cmd(runs: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "chorus.train", "job=sft", f"runs_dir={runs}", "logger=none", "format=vectors",
            "sft_stage.tasks.difficulty=easy", "sft_stage.tasks.per_family=2", "sft_stage.tasks.seed=0",
            "sft_stage.steps=2",
            f"sft_stage.max_prompt_tokens={PROMPT}", "sft_stage.min_coverage=50", "sft_stage.evaluate=false", *args]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("transformers") is None or importlib.util.find_spec("uvicorn") is None,
                    reason="needs `transformers serve` on PATH (pip install -e .[serving])")
def test_a_stage_from_a_served_teacher_resumes_from_its_cache_and_trains_again_from_its_folder(
        burst_teacher, tiny_xs, cache_root, tmp_path):
    datasets = pytest.importorskip("datasets")
    server = Server(Path(burst_teacher), tmp_path)
    log = server.start()
    env = dict(os.environ, CHORUS_CACHE_DIR=str(cache_root))
    n_tasks = len(load_tasks("generated", split="train", difficulty="easy", per_family=2, seed=0))
    teacher = ["sft_stage=stage2", f"sft_stage.init={tiny_xs}", "sft_stage.candidates=[teacher]",
               "sft_stage.teacher.engine=openai", f"sft_stage.teacher.api_base_url={server.url}",
               f"sft_stage.teacher.path={burst_teacher}", "+sft_stage.teacher.api_extra_body.generation_config="
               "'{\"do_sample\": true}'", "sft_stage.teacher.samples=4", "sft_stage.teacher.max_new_tokens=48",
               f"sft_stage.teacher.max_prompt_tokens={PROMPT}", "sft_stage.teacher.api_concurrency=2"]
    try:
        first = subprocess.run(stage_cmd(tmp_path / "a", *teacher), capture_output=True, text=True, env=env,
                               timeout=900, cwd=ROOT)
        assert first.returncode == 0, first.stderr[-2000:]
        paid = requests_received(log)
        [stage_dir] = (tmp_path / "a" / "sft").iterdir()
        rows = datasets.load_dataset("parquet", data_dir=str(stage_dir / "data"))["train"].to_list()
        kinds = {r["kind"] for r in rows}
        assert kinds == {"validated", "repair"}, [(r["kind"], r["coverage"]) for r in rows]
        validated = [r for r in rows if r["kind"] == "validated"]
        repairs = [r for r in rows if r["kind"] == "repair"]
        assert all(r["source"] == "teacher" and r["coverage"] >= 50 and r["status"] == "ok" for r in validated)
        assert all(r["from_coverage"] < 50 and r["source"] in ("teacher_repair", "best_validated (teacher)")
                   and r["messages"][-1]["role"] == "user" for r in repairs)
        assert all((r["teacher_engine"], r["teacher_model"], r["temperature"], r["samples_per_task"], r["split"])
                   == ("openai", str(burst_teacher), 1.0, 4, "train") for r in rows)
        # 4 samples per task, then one repair request per failed sample; a failed sample gives a repair
        # example when its repair passes or its task has a validated answer
        failed = paid - 4 * n_tasks
        assert 0 < len(repairs) <= failed
        info = json.loads((stage_dir / "stage.json").read_text())
        weights = info["task_weights"]  # prioritised on the starting model's own coverage
        assert len(weights) == n_tasks and abs(sum(weights.values()) - 1) < 1e-9 and info["examples"] == 2 * 4
        # the same stage again in another runs dir: every request read from the cache, the same rows
        again = subprocess.run(stage_cmd(tmp_path / "b", *teacher), capture_output=True, text=True, env=env,
                               timeout=900, cwd=ROOT)
        assert again.returncode == 0, again.stderr[-2000:]
        assert requests_received(log) == paid
        [other] = (tmp_path / "b" / "sft").iterdir()
        assert datasets.load_dataset("parquet", data_dir=str(other / "data"))["train"].to_list() == rows
    finally:
        server.kill()
    # a stage trained from the folder made above, with no teacher at all
    from_folder = subprocess.run(stage_cmd(tmp_path / "c", "sft_stage=stage0", f"sft_stage.init={tiny_xs}",
                                           f"sft_stage.data={stage_dir / 'data'}"),
                                 capture_output=True, text=True, env=env, timeout=900, cwd=ROOT)
    assert from_folder.returncode == 0, from_folder.stderr[-2000:]
    [trained] = (tmp_path / "c" / "sft").iterdir()
    info = json.loads((trained / "stage.json").read_text())
    assert info["data"] == str(stage_dir / "data") and Path(info["checkpoint"], "config.json").exists()
    # the server is gone: the build stops in one line before any sample is drawn or any step trains
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    gone = [o if not o.startswith("sft_stage.teacher.api_base_url=") else
            f"sft_stage.teacher.api_base_url=http://127.0.0.1:{closed}/v1" for o in teacher]
    p = subprocess.run(stage_cmd(tmp_path / "d", *gone), capture_output=True, text=True, env=env, timeout=300,
                       cwd=ROOT)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith("chorus.train: error: the teacher (sft_stage.teacher) is "
                                                        "unreachable")
    assert not list((tmp_path / "d").rglob("config.json"))
