"""simulator.executor=ray on real local Ray clusters (CPU): the same results as the local pool, from
the library and from `chorus.evaluate`; a worker that dies and a node that is lost are harness_error
for their jobs; a wrong cluster address is a one-line error. Needs the `ray` extra."""
import dataclasses
import functools
import json
import os
import socket
import subprocess
import sys
import time

import pytest

ray = pytest.importorskip("ray")

from chorus.sim import SimConfig, SimResult  # noqa: E402
from chorus.sim.executor import LocalExecutor, make_executor  # noqa: E402
from chorus.sim.pool import evaluate_many, settled  # noqa: E402
from chorus.stimulus.formats import score  # noqa: E402
from chorus.tasks import load_tasks  # noqa: E402


@pytest.mark.slow  # starts a Ray cluster and simulates four programs twice
def test_ray_and_local_executors_score_the_same_tasks_identically_and_a_dead_worker_is_a_status(sim_cfg):
    def echo_or_die(task, tb, cfg):  # local, so Ray ships it by value (tests/ is not on workers' path)
        if tb == "DIE":
            os._exit(1)  # what a segfaulting simulator does to its worker
        return SimResult("rejected", tb)

    tasks = load_tasks("generated", per_family=1, families=["counter", "alu"])
    jobs = [(t, t.meta["programs"][p]) for t in tasks for p in ("strong", "weak")]
    fn = functools.partial(score, "vectors", options={})
    with LocalExecutor(2) as ex:
        local = evaluate_many(jobs, sim_cfg, fn=fn, executor=ex)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        with make_executor(dataclasses.replace(sim_cfg, executor="ray")) as ex:  # joins, leaves it running
            remote = evaluate_many(jobs, sim_cfg, fn=fn, executor=ex)
            dead = settled(ex.submit(echo_or_die, tasks[0], "DIE", sim_cfg))
            after = settled(ex.submit(echo_or_die, tasks[0], "ok", sim_cfg))
        assert ray.is_initialized()
    finally:
        ray.shutdown()
    assert all(r.status == "ok" for r in local)
    assert [(r.status, r.overall, r.report.metrics) for r in remote] == \
           [(r.status, r.overall, r.report.metrics) for r in local]
    assert dead.status == "harness_error" and "WorkerCrashedError" in dead.reason
    assert after.reason == "ok"  # the cluster keeps serving after a worker died


@pytest.mark.slow  # a two-node cluster, one node removed while it simulates
def test_a_lost_node_is_harness_error_for_its_jobs_and_the_cluster_keeps_serving():
    from ray.cluster_utils import Cluster

    def where(task, tb, cfg):
        if tb == "hang":
            time.sleep(120)  # still running when its node goes
        return SimResult("rejected", tb)

    # the head offers no CPUs, so every simulation runs on a worker node
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        node = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        task = load_tasks("generated", per_family=1, families=["counter"])[0]
        with make_executor(SimConfig(executor="ray", executor_address=cluster.address)) as ex:
            assert settled(ex.submit(where, task, "warm", SimConfig())).reason == "warm"
            hung = ex.submit(where, task, "hang", SimConfig())
            time.sleep(1.0)  # let it start on the node
            cluster.remove_node(node, allow_graceful=False)
            lost = settled(hung)
            cluster.add_node(num_cpus=1)
            after = settled(ex.submit(where, task, "after", SimConfig()))
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert lost.status == "harness_error", lost
    assert after.status == "rejected" and after.reason == "after"


def test_an_address_nothing_answers_at_is_a_one_line_error_within_seconds():
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ex = make_executor(SimConfig(executor="ray", executor_address=f"127.0.0.1:{port}"))  # connects lazily
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=rf"executor_address='127.0.0.1:{port}': no Ray cluster answers there.*"
                                         r"ray start --head"):
        ex.submit(print)
    assert time.monotonic() - t0 < 10
    assert not ray.is_initialized()


@pytest.mark.slow  # two chorus.evaluate runs, one of which starts a local Ray cluster
def test_chorus_evaluate_with_ray_writes_the_same_table_as_with_the_local_pool(tmp_path, cache_root):
    def evaluate(executor: str) -> list[dict]:
        out = tmp_path / executor
        p = subprocess.run([sys.executable, "-m", "chorus.evaluate", "progress=false", "tasks=generated",
                            "tasks.per_family=1", "tasks.families=[counter,alu]", "format=vectors",
                            "policy=random", "n_samples=2", "simulator.cache=false", "simulator.workers=2",
                            f"simulator.executor={executor}", f"hydra.run.dir={out}"],
                           capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, CHORUS_CACHE_DIR=str(cache_root)))
        assert p.returncode == 0, p.stderr[-2000:]
        return [json.loads(line) for line in (out / "per_task.jsonl").read_text().splitlines()]

    local, remote = evaluate("local"), evaluate("ray")
    keep = ("task_id", "sample", "status", "overall", "metrics", "passed")
    assert len(local) == 4 and all(r["status"] == "ok" for r in local)
    assert [{k: r[k] for k in keep} for r in remote] == [{k: r[k] for k in keep} for r in local]
