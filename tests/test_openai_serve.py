"""engine=openai through a real `transformers serve` (the `serving` extra) serving the tiny model: a
direct evaluation killed mid-run and resumed, and an agentic one with n_samples=2. One server per
module; the kill test restarts it on the same port (the cache key holds the endpoint)."""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import Server

pytest.importorskip("fastapi", reason="needs the serving extra (pip install -e .[serving])")
pytest.importorskip("uvicorn", reason="needs the serving extra (pip install -e .[serving])")
pytest.importorskip("openai", reason="needs the serving extra (pip install -e .[serving])")
if shutil.which("transformers") is None:
    pytest.skip("the `transformers` CLI (transformers serve) is not on PATH", allow_module_level=True)

pytestmark = pytest.mark.slow

# The tiny model's generation_config does not sample, and `transformers serve` then decodes greedily
# whatever the temperature: this is how chorus asks it to sample (policy.api_extra_body).
SAMPLE = "+policy.api_extra_body.generation_config='{\"do_sample\": true}'"


@pytest.fixture(scope="module")
def server(tiny_xs, tmp_path_factory):
    s = Server(tiny_xs, tmp_path_factory.mktemp("serve"))
    s.start()
    yield s
    s.kill()


def requests_received(log: Path) -> int:
    """The completions the server answered, from its HTTP access log (uvicorn's line per request)."""
    return log.read_text().count('"POST /v1/completions HTTP/1.1"')


def cached(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as con:
            return con.execute("SELECT COUNT(*) FROM completions").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def evaluate(server: Server, cache_root: Path, tiny_xs: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "chorus.evaluate", "tasks=generated", "tasks.per_family=1", "tasks.families=[fsm]",
            "policy=model", "model=hf", f"model.path={tiny_xs}", "format=vectors", "progress=false", "logger=none",
            "policy.engine=openai", f"policy.api_base_url={server.url}", SAMPLE, *args]


def test_killed_server_mid_run_then_resumed_run_pays_only_for_the_rest(server, cache_root, tiny_xs, tmp_path):
    n = 6
    env = dict(os.environ, CHORUS_CACHE_DIR=str(cache_root))
    db = cache_root / "openai" / "completions.sqlite"
    cmd = evaluate(server, cache_root, tiny_xs, f"n_samples={n}", "policy.max_new_tokens=16",
                   "policy.api_concurrency=1", "policy.api_max_retries=1", "policy.api_backoff_s=0.2")
    before = cached(db)
    run = subprocess.Popen([*cmd, f"hydra.run.dir={tmp_path / 'a'}"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=env)
    while cached(db) == before and run.poll() is None:
        time.sleep(0.02)
    server.kill()  # with the first sample cached, the rest still to come
    out, err = run.communicate(timeout=120)
    k = cached(db) - before
    assert run.returncode == 2 and 1 <= k < n, (k, err)
    assert "chorus.evaluate: error:" in err and "rerun the same command to resume" in err and "Traceback" not in err
    log = server.start()
    p = subprocess.run([*cmd, f"hydra.run.dir={tmp_path / 'b'}"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(x) for x in (tmp_path / "b" / "per_task.jsonl").read_text().splitlines()]
    usage = json.loads((tmp_path / "b" / "summary.json").read_text())["api_usage"]
    assert sorted(r["sample"] for r in rows) == list(range(n))  # one task
    assert sum(r["api_cached"] for r in rows) == usage["cached_samples"] == k
    assert usage["paid_samples"] == usage["http_calls"] == requests_received(log) == n - k
    assert all(0 < r["completion_tokens"] <= 16 and r["prompt_tokens"] > 0 for r in rows)
    assert usage["paid_completion_tokens"] + usage["cached_completion_tokens"] == sum(r["completion_tokens"] for r in rows)
    assert cached(db) - before == n


def test_agentic_with_two_samples_through_the_server(server, sim_cfg, tiny_xs, tmp_path):
    """In-process (the CLI path is the test above): protocol=agentic over the engine, two samples per
    task, each its own request in each round."""
    from transformers import AutoTokenizer

    from chorus.policy.engines import SamplingParams
    from chorus.policy.openai_engine import CompletionCache, EndpointConf, OpenAIEngine
    from chorus.protocol.agentic import run_agentic
    from chorus.tasks import load_tasks

    tasks = load_tasks("generated", per_family=1, families=["fsm"])
    engine = OpenAIEngine(EndpointConf(server.url, str(tiny_xs), extra_body={"generation_config": '{"do_sample": true}'}),
                          CompletionCache(tmp_path / "c.sqlite"))
    rows = run_agentic(tasks, engine, AutoTokenizer.from_pretrained(tiny_xs), "vectors", 2,
                       SamplingParams(max_new_tokens=16), sim_cfg, rounds=1, workers=1, progress=False)
    # a random-init model never reaches full coverage, so both samples run both rounds
    assert len(tasks) == 1 and sorted((r["sample"], r["round"]) for r in rows) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert engine.usage["paid_samples"] == engine.http_calls == 4 and not any(r["api_cached"] for r in rows)
    assert engine.usage["paid_completion_tokens"] == sum(r["completion_tokens"] for r in rows) > 0
    assert all(r["logprobs"] is None for r in rows)  # transformers serve sends none
