"""simulator.executor=ray on a real local Ray cluster (CPU): the same results as the local pool,
and a worker that dies is harness_error for its job. Needs the `ray` extra."""
import functools
import os

import pytest

ray = pytest.importorskip("ray")

from chorus.sim import SimResult  # noqa: E402
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
        with make_executor("ray") as ex:  # joins the running cluster, leaves it running
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
