"""engine=openai against real local HTTP servers: a scripted stub (tests/openai_stub.py) for the
429/5xx retries, the cache resume and the token accounting, and a real `transformers serve` (the
`serving` extra) for direct and agentic evaluations, killed mid-run and resumed."""
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chorus.policy.engines import SamplingParams
from chorus.policy.openai_engine import (CompletionCache, EndpointConf, EndpointError, OpenAIEngine,
                                         open_openai_engine)

STUB = Path(__file__).with_name("openai_stub.py")


@pytest.fixture
def stub(tmp_path):
    """start(script) -> (base_url, log path); every server started is stopped at teardown."""
    procs = []

    def start(script: str = ""):
        port_file, log = tmp_path / f"port{len(procs)}", tmp_path / f"log{len(procs)}.jsonl"
        log.touch()
        procs.append(subprocess.Popen([sys.executable, str(STUB), str(port_file), str(log), script]))
        for _ in range(200):
            if port_file.exists():
                return f"http://127.0.0.1:{port_file.read_text()}/v1", log
            time.sleep(0.05)
        raise RuntimeError("the stub server did not start")

    yield start
    for p in procs:
        p.kill()
        p.wait()


def requests(log: Path) -> list[dict]:
    return [json.loads(x) for x in log.read_text().splitlines()]


def engine(url, cache=None, sleeps=None, **kw):
    conf = EndpointConf(url, "m", **{"concurrency": 2, "max_retries": 3, "backoff_s": 0.5, **kw})
    return OpenAIEngine(conf, CompletionCache(cache), sleep=(sleeps.append if sleeps is not None else time.sleep))


def test_429_then_200_backs_off_once_and_returns_one_sample(stub):
    url, log = stub("429")
    sleeps = []
    out = engine(url, sleeps=sleeps).generate(["p q r"], n=1, params=SamplingParams(seed=7))
    assert len(out) == 1 and len(out[0]) == 1
    g = out[0][0]
    assert g.text == "sample with seed 7" and g.logprobs == [-0.5, -0.25, -0.125]
    assert g.prompt_tokens == 3 and g.meta["completion_tokens"] == 3 and g.finish_reason == "length"
    assert sleeps == [0.5] and len(requests(log)) == 2


def test_5xx_backoff_doubles_and_gives_up_with_a_one_line_error(stub):
    url, log = stub("503,500,502,503")
    sleeps = []
    with pytest.raises(EndpointError, match="failed 4 times .*HTTP 503.*rerun the same command to resume"):
        engine(url, sleeps=sleeps).generate(["p"], n=1)
    assert sleeps == [0.5, 1.0, 2.0] and len(requests(log)) == 4


def test_a_stalled_request_times_out_and_is_retried(stub):
    url, log = stub("0")
    sleeps = []
    out = engine(url, sleeps=sleeps, timeout_s=0.5).generate(["p"], n=1, params=SamplingParams(seed=2))
    assert out[0][0].text == "sample with seed 2" and sleeps == [0.5] and len(requests(log)) == 2


def test_rl_refuses_engine_openai():
    from chorus.config.schema import RLConf, TrainerConf
    from chorus.rl.algos import get_algo
    from chorus.rl.run import check_run

    with pytest.raises(ValueError, match="rl.engine=openai cannot train"):
        check_run(get_algo("dapo"), RLConf(engine="openai"), TrainerConf())


def test_400_is_not_retried(stub):
    url, log = stub("400")
    with pytest.raises(EndpointError, match="HTTP 400"):
        engine(url, sleeps=[]).generate(["p"], n=1)
    assert len(requests(log)) == 1


def test_refused_connection_is_retried_then_reported(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    sleeps = []
    with pytest.raises(EndpointError, match="failed 2 times"):
        engine(url, sleeps=sleeps, max_retries=1).generate(["p"], n=1)
    assert sleeps == [0.5]


def test_samples_get_their_own_seed_and_order_and_key_comes_from_env(stub, monkeypatch):
    url, log = stub()
    monkeypatch.setenv("CHORUS_TEST_KEY", "sk-secret")
    out = engine(url, api_key_env="CHORUS_TEST_KEY").generate(["a", "b c"], n=3, params=SamplingParams(seed=10))
    assert [[g.text for g in s] for s in out] == [[f"sample with seed {10 + j}" for j in range(3)]] * 2
    assert [g.prompt_tokens for s in out for g in s] == [1, 1, 1, 2, 2, 2]
    sent = requests(log)
    assert len(sent) == 6 and {r["auth"] for r in sent} == {"Bearer sk-secret"}


def test_missing_key_variable_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("CHORUS_TEST_KEY", raising=False)
    with pytest.raises(ValueError, match="CHORUS_TEST_KEY .*is empty"):
        engine("http://127.0.0.1:1/v1", api_key_env="CHORUS_TEST_KEY")


def test_crashed_run_resumes_from_cache_without_paying_twice(stub, tmp_path, monkeypatch):
    monkeypatch.setenv("CHORUS_TEST_KEY", "sk-secret")
    cache = tmp_path / "cache.sqlite"
    params = SamplingParams(seed=3, max_new_tokens=8)
    # The server fails after two samples (twice: more than max_retries=1 allows), then recovers.
    url, log = stub("200,200,500,500")
    with pytest.raises(EndpointError):
        engine(url, cache, sleeps=[], concurrency=1, max_retries=1).generate(["a", "b"], n=2, params=params)
    assert len(requests(log)) == 4  # two answered, one request and its retry; the fourth sample not sent
    # The rerun (same endpoint, settings) asks only for the two missing samples.
    e = engine(url, cache, sleeps=[], concurrency=1)
    full = e.generate(["a", "b"], n=2, params=params)
    assert e.http_calls == 2 and [(r["prompt"], r["seed"]) for r in requests(log)[4:]] == [("b", 3), ("b", 4)]
    # A third run pays nothing and returns the same completions and token counts.
    again = engine(url, cache, sleeps=[])
    assert [[g.text for g in s] for s in again.generate(["a", "b"], n=2, params=params)] == \
        [[g.text for g in s] for s in full]
    assert again.http_calls == 0 and again.usage == {
        "paid_samples": 0, "paid_prompt_tokens": 0, "paid_completion_tokens": 0,
        "cached_samples": 4, "cached_prompt_tokens": 4, "cached_completion_tokens": 12}
    assert [[g.meta["api_cached"] for g in s] for s in full] == [[True, True], [False, False]]
    assert {tuple(g.logprobs) for s in full for g in s} == {(-0.5, -0.25, -0.125)}  # kept in the cache
    assert b"sk-secret" not in cache.read_bytes()
    # Other sampling settings are other completions.
    other = engine(url, cache, sleeps=[])
    other.generate(["a"], n=1, params=SamplingParams(seed=3, max_new_tokens=9))
    assert other.http_calls == 1


def test_evaluate_refuses_engine_openai_without_a_base_url(tmp_path, cache_root, tiny_xs):
    env = dict(os.environ, CHORUS_CACHE_DIR=str(cache_root))
    p = subprocess.run([sys.executable, "-m", "chorus.evaluate", "tasks=bundled", "tasks.limit=1", "policy=model",
                        "model=hf", f"model.path={tiny_xs}", "policy.engine=openai", "logger=none",
                        f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 2 and "policy.api_base_url" in p.stderr and "Traceback" not in p.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_agentic_rounds_through_the_engine_count_server_tokens(stub, tiny_xs, sim_cfg, tmp_path):
    """protocol=agentic and n_samples over the engine; completion_tokens come from the server's usage
    (the engine returns no token ids), and the rerun of every round comes from the cache."""
    from transformers import AutoTokenizer

    from chorus.protocol.agentic import run_agentic
    from chorus.tasks import load_tasks

    url, log = stub()
    tasks = load_tasks("generated", split="train", difficulty="easy", per_family=1, families=["fsm"], seed=0)[:1]
    tok = AutoTokenizer.from_pretrained(tiny_xs)
    run = lambda e: run_agentic(tasks, e, tok, "vectors", 2, SamplingParams(seed=5), sim_cfg, rounds=1,  # noqa: E731
                                workers=1, progress=False)
    rows = run(engine(url, tmp_path / "c.sqlite"))
    assert len(rows) == 4 and {r["round"] for r in rows} == {0, 1}
    assert [r["completion_tokens"] for r in rows] == [3] * 4
    sent = requests(log)
    # Round 0 asks for the task's two samples as one prompt twice: each gets its own seed.
    assert sorted(r["seed"] for r in sent if r["prompt"] == sent[0]["prompt"]) == [5, 6]
    assert len(sent) == 4 and len({r["prompt"] for r in sent}) == 3  # round 1 prompts carry each sample's feedback
    again = engine(url, tmp_path / "c.sqlite")
    assert [r["completion_tokens"] for r in run(again)] == [3] * 4 and again.http_calls == 0


def test_cache_lives_under_the_cache_root_and_can_be_turned_off(tmp_path):
    from chorus.config.schema import PolicyConf

    policy = {"api_base_url": "http://127.0.0.1:1/v1", "api_model": "m", "api_key_env": None, "api_concurrency": 1,
              "api_max_retries": 0, "api_backoff_s": 0.0, "api_timeout_s": 1.0, "api_cache": PolicyConf.api_cache}
    assert open_openai_engine(policy, None, tmp_path).cache.path == tmp_path / "openai" / "completions.sqlite"
    assert (tmp_path / "openai" / "completions.sqlite").exists()
    assert open_openai_engine({**policy, "api_cache": False}, None, tmp_path / "x").cache.path is None


def test_extra_body_is_sent_and_keys_its_own_cache_entries(stub, tmp_path):
    url, log = stub()
    extra = {"generation_config": '{"do_sample": true}'}
    params = SamplingParams(seed=1, max_new_tokens=4)
    engine(url, tmp_path / "c.sqlite").generate(["a"], n=1, params=params)
    e = engine(url, tmp_path / "c.sqlite", extra_body=extra)
    e.generate(["a"], n=1, params=params)
    sent = requests(log)
    assert e.http_calls == 1 and "generation_config" not in sent[0] and sent[1]["generation_config"] == extra[
        "generation_config"]


@pytest.mark.slow
def test_per_task_table_accounts_paid_tokens_and_log_probs(stub, tmp_path, cache_root, tiny_xs):
    """Every row carries the server's token counts, whether it was paid for in this run, and its log-probs
    (None where the server sent none); the summary splits paid from cached (a resumed CLI run's cached
    counts: tests/test_openai_serve.py). Expected numbers come from the requests the stub logged (it
    counts a prompt's whitespace-separated words as its tokens)."""
    import pandas as pd

    url, log = stub("201")  # the first answer carries no log-probs, like `transformers serve`
    root = tmp_path / "root"
    env = dict(os.environ, CHORUS_CACHE_DIR=str(cache_root))
    cmd = [sys.executable, "-m", "chorus.evaluate", "tasks=bundled", "tasks.limit=2", "policy=model", "model=hf",
           f"model.path={tiny_xs}", "n_samples=2", "policy.max_new_tokens=8", "progress=false", "logger=none",
           "policy.engine=openai", f"policy.api_base_url={url}", "policy.api_concurrency=1",
           f"simulator.cache_dir={root}"]

    p = subprocess.run([*cmd, f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(x) for x in (tmp_path / "per_task.jsonl").read_text().splitlines()]
    usage = json.loads((tmp_path / "summary.json").read_text())["api_usage"]
    sent = requests(log)
    assert (root / "openai" / "completions.sqlite").exists()  # simulator.cache_dir wins over $CHORUS_CACHE_DIR
    # concurrency 1: requests go out in row order (task by task, sample by sample)
    words = [len(r["prompt"].split()) for r in sent]
    assert len(rows) == len(sent) == 4 and [r["prompt_tokens"] for r in rows] == words
    assert [r["completion_tokens"] for r in rows] == [3] * 4 and [r["api_cached"] for r in rows] == [False] * 4
    assert [r["logprobs"] for r in rows] == [None] + [[-0.5, -0.25, -0.125]] * 3
    assert usage == {"paid_samples": 4, "paid_prompt_tokens": sum(words), "paid_completion_tokens": 12,
                     "cached_samples": 0, "cached_prompt_tokens": 0, "cached_completion_tokens": 0, "http_calls": 4}
    assert pd.read_parquet(tmp_path / "per_task.parquet")["logprobs"].isna().tolist() == [True, False, False, False]
