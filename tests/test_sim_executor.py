"""The simulation executor: chosen by simulator.executor, passed in by callers, and a dead worker
is harness_error for the jobs it took down, never an exception."""
import os
import pickle

import pytest

from chorus.config.job_context import JobContext
from chorus.sim import SimConfig, SimResult
from chorus.sim.config import sim_config
from chorus.sim.executor import LocalExecutor
from chorus.sim.pool import evaluate_many, settled
from chorus.tasks import load_tasks


def _echo_or_die(task, tb, cfg):
    if tb == "DIE":
        os._exit(1)  # what a segfaulting simulator does to its worker
    return SimResult("rejected", tb)


def test_evaluate_many_uses_the_given_executor_and_a_sample_that_kills_its_worker_is_charged():
    task = load_tasks("generated", per_family=1, families=["counter"])[0]
    with LocalExecutor(1) as ex:  # one worker runs the jobs in order: a and b finish before DIE
        results = evaluate_many([(task, "a"), (task, "b"), (task, "DIE"), (task, "d")], SimConfig(),
                                fn=_echo_or_die, executor=ex)
        assert [(r.status, r.reason[:41]) for r in results] == [
            ("rejected", "a"), ("rejected", "b"), ("runtime_error", "scoring this sample killed its worker pro"),
            ("rejected", "d")]  # d was queued behind DIE when the pool broke: re-run, not lost
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


def _busy(task, tb, cfg):
    """tb: what this sample does to its worker; anything else takes a moment and returns."""
    import time

    if tb == "HOG_MEMORY":
        blob = bytearray(3 << 30)  # over the 256 MB budget: MemoryError inside the worker
        return SimResult("ok", str(len(blob)))
    if tb == "HOG_CPU":
        while True:  # killed by SIGXCPU past the 1 s CPU budget
            pass
    if tb == "DIE":
        time.sleep(0.3)
        os._exit(1)
    time.sleep(0.6)  # in flight beside the one that kills the pool
    return SimResult("rejected", tb)


@pytest.mark.slow
def test_a_sample_over_its_budget_is_charged_and_the_samples_beside_it_keep_their_results():
    from chorus.sim.worker_guard import Budget

    task = load_tasks("generated", per_family=1, families=["counter"])[0]
    jobs = ["a", "DIE", "b", "HOG_MEMORY", "c", "HOG_CPU", "d", "e"]
    with LocalExecutor(2, Budget(mem_mb=256, cpu_s=1)) as ex:
        results = evaluate_many([(task, j) for j in jobs], SimConfig(), fn=_busy, executor=ex)
    got = dict(zip(jobs, results))
    for name in "abcde":  # in flight with a killer or queued behind it: each gets its own result
        assert (got[name].status, got[name].reason) == ("rejected", name)
    assert got["HOG_MEMORY"].status == "compile_error" and "scoring_mem_mb=256" in got["HOG_MEMORY"].reason
    for name in ("DIE", "HOG_CPU"):
        assert got[name].status == "runtime_error" and "killed its worker process" in got[name].reason, got[name]



def _kill_or_echo(task, tb, cfg):
    import signal

    if tb == "KILL":
        os.kill(os.getpid(), signal.SIGKILL)  # what a simulator the kernel kills does to its worker
    return SimResult("rejected", tb)


@pytest.mark.slow
def test_many_worker_killers_never_take_a_queued_honest_job_down_and_each_is_charged():
    from chorus.sim.worker_guard import Budget

    task = load_tasks("generated", per_family=1, families=["counter"])[0]
    jobs = ["KILL"] * 8 + ["honest-1", "honest-2"]  # more breaks of the pool than any fixed retry count
    with LocalExecutor(2, Budget(cpu_s=2)) as ex:
        results = evaluate_many([(task, j) for j in jobs], SimConfig(), fn=_kill_or_echo, executor=ex)
        again = settled(ex.submit(_kill_or_echo, task, "KILL", SimConfig()))  # charged every time it comes back
    for r in [*results[:8], again]:
        assert r.status == "runtime_error" and "killed its worker process" in r.reason, r
    assert [(r.status, r.reason) for r in results[8:]] == [("rejected", "honest-1"), ("rejected", "honest-2")]

KILLED_RUN = """
import sys, time
from pathlib import Path
from chorus.sim.executor import LocalExecutor
import test_sim_executor as t
if __name__ == "__main__":
    ex = LocalExecutor(2)
    futures = [ex.submit(t._long_build, sys.argv[1]) for _ in range(2)]
    time.sleep(600)
"""


def _long_build(tag):
    """A worker's unjailed command (like make) that would run long after its run was killed."""
    import tempfile
    from pathlib import Path

    from chorus.sim.process import run_limited

    d = Path(tempfile.mkdtemp())
    run_limited(["sleep", tag], cwd=d, env={}, timeout_s=120, log_path=d / "log", mem_mb=512, file_mb=8)


@pytest.mark.slow
def test_a_killed_run_leaves_no_worker_forkserver_or_command_behind(tmp_path):
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    tag = "97.125"  # the unique argument of the workers' `sleep`
    script = tmp_path / "run.py"
    script.write_text(KILLED_RUN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.Popen([sys.executable, str(script), tag], env=env)

    def ours() -> list[str]:  # the run's descendants, found by what they run
        out = subprocess.run(["ps", "-eo", "pid,ppid,args"], capture_output=True, text=True).stdout
        return [ln for ln in out.splitlines() if f"sleep {tag}" in ln or str(script) in ln
                or (f" {run.pid} " in ln and "multiprocessing" in ln)]

    def sleeps() -> int:  # the commands themselves, not their keepers (process.KEEPER)
        return sum(f"sleep {tag}" in ln and "chorus-keeper" not in ln for ln in ours())

    deadline = time.monotonic() + 60
    while sleeps() < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sleeps() == 2  # both workers are mid-command
    run.send_signal(signal.SIGKILL)
    run.wait()
    deadline = time.monotonic() + 10
    while ours() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ours() == []


def _toolchain_found_before_the_job() -> int:
    from chorus.sim.toolchain import find_toolchain

    return find_toolchain.cache_info().currsize


def test_workers_start_with_the_toolchain_found():
    """The forkserver finds the toolchain once (sim/forkserver_warm.py): a worker of a new pool does not
    run `verilator --version` again (~75 ms each, in every pool)."""
    with LocalExecutor(1) as ex:
        assert ex.submit(_toolchain_found_before_the_job).result() == 1
