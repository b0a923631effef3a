"""The simulation executor: chosen by simulator.executor, passed in by callers, and a dead worker
is harness_error for the jobs it took down, never an exception."""
import os
import pickle

import pytest

from chorus.job_context import JobContext
from chorus.sim import SimConfig, SimResult
from chorus.sim.config import sim_config
from chorus.sim.executor import LocalExecutor
from chorus.sim.pool import evaluate_many, settled
from chorus.tasks import load_tasks


def _echo_or_die(task, tb, cfg):
    if tb == "DIE":
        os._exit(1)  # what a segfaulting simulator does to its worker
    return SimResult("rejected", tb)


def test_evaluate_many_uses_the_given_executor_and_a_dead_worker_is_a_status():
    task = load_tasks("generated", per_family=1, families=["counter"])[0]
    with LocalExecutor(1) as ex:  # one worker runs the jobs in order: a and b finish before DIE
        results = evaluate_many([(task, "a"), (task, "b"), (task, "DIE")], SimConfig(), fn=_echo_or_die,
                                executor=ex)
        assert [(r.status, r.reason[:19]) for r in results] == [
            ("rejected", "a"), ("rejected", "b"), ("harness_error", "worker process died")]
        # the caller's executor stays open, and its broken pool was replaced
        assert settled(ex.submit(_echo_or_die, task, "c", SimConfig())).reason == "c"


def test_the_executor_is_a_validated_simulator_setting():
    assert SimConfig().executor == "local"
    with pytest.raises(ValueError, match=r"unknown simulator.executor 'slurm'; valid: \['local', 'ray'\]"):
        sim_config({"executor": "slurm", "isolation": "none"})
    # where a simulation runs never changes its result, so results are shared across executors
    assert SimConfig(executor="ray", executor_cpus=2.0).fingerprint() == SimConfig().fingerprint()


def test_a_job_context_makes_a_lazy_executor_that_crosses_to_spawned_ranks(tmp_path):
    ctx = JobContext(tmp_path, "vectors", workers=3)
    assert isinstance(ctx.executor, LocalExecutor) and ctx.executor.workers == 3
    copy = pickle.loads(pickle.dumps(ctx))  # what a spawning DDP strategy does with it
    assert copy.executor.workers == 3 and copy.executor._pool is None
