"""The pipeline's runner under each launcher (workflow/launchers.py): the same DAG order, resume,
failure and steps.json with local subprocesses and with submitit jobs (its local executor, real
processes), on stand-in steps (tests/step_stub.py) that take a fraction of a second each."""
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from chorus.config.schema import SubmititConf
from chorus.workflow.launchers import MISSING_SUBMITIT, make_launcher
from chorus.workflow.runner import StepFailed, run_steps
from chorus.workflow.steps import Step

TESTS = Path(__file__).resolve().parent
ENV = {"PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}  # step_stub importable


def launcher(kind: str, tmp_path: Path):
    if kind == "submitit":
        pytest.importorskip("submitit")
    settings = dataclasses.asdict(SubmititConf(cluster="local", folder=str(tmp_path / "submitit")))
    return make_launcher(kind, settings)


def stub(name: str, root: Path, after=(), **args) -> Step:
    run = root / name
    return Step(name, "step_stub", [f"out={run}", *(f"{k}={v}" for k, v in args.items())], run, list(after))


def times(step: Step) -> dict:
    return json.loads((step.run_dir / "summary.json").read_text())


KINDS = ["local", pytest.param("submitit", marks=pytest.mark.slow)]


@pytest.mark.parametrize("kind", KINDS)
def test_steps_start_after_what_they_wait_for_and_a_rerun_skips_them(kind, tmp_path):
    runs, work = tmp_path / "runs", tmp_path / "work"
    a, c = stub("a", runs, sleep=1), stub("c", runs)
    b = stub("b", runs, after=["a"])
    d = stub("d", runs, after=["b", "c"])
    records = run_steps([a, b, c, d], work, jobs=2, env=ENV, poll_s=0.1, launcher=launcher(kind, tmp_path))
    assert [r["status"] for r in records] == ["done"] * 4
    assert times(b)["start"] >= times(a)["end"] and times(d)["start"] >= max(times(b)["end"], times(c)["end"])
    assert times(c)["start"] < times(a)["end"]  # two at once: c did not wait for a
    saved = json.loads((work / "steps.json").read_text())
    assert [(r["name"], r["status"]) for r in saved] == [("a", "done"), ("b", "done"), ("c", "done"), ("d", "done")]
    assert all(r["seconds"] > 0 for r in saved)
    stamps = [(s.run_dir / "summary.json").stat().st_mtime for s in (a, b, c, d)]

    again = run_steps([a, b, c, d], work, jobs=2, env=ENV, poll_s=0.1, launcher=launcher(kind, tmp_path))
    assert [r["status"] for r in again] == ["skipped (done)"] * 4
    assert [r["seconds"] for r in again] == [r["seconds"] for r in saved]  # the times they took when they ran
    assert [(s.run_dir / "summary.json").stat().st_mtime for s in (a, b, c, d)] == stamps


def test_a_step_resumed_after_a_stop_counts_the_time_of_every_attempt(tmp_path):
    """steps.json from the run before: `a` was preempted after 30 s; `b` was running when the pipeline
    itself was killed, its log last written 20 s after it started. Both run now and count those too."""
    runs, work = tmp_path / "runs", tmp_path / "work"
    a, b = stub("a", runs), stub("b", runs)
    (work / "logs").mkdir(parents=True)
    log_b, started = work / "logs" / "b.log", time.time() - 100
    log_b.write_text("partial\n")
    os.utime(log_b, (started + 20, started + 20))
    (work / "steps.json").write_text(json.dumps([
        {"name": "a", "run_dir": str(a.run_dir), "status": "preempted (SIGTERM)", "seconds": 30.0, "started": started},
        {"name": "b", "run_dir": str(b.run_dir), "status": "running", "seconds": 0.0, "started": started,
         "log": str(log_b)}]))
    records = {r["name"]: r for r in run_steps([a, b], work, jobs=2, env=ENV, poll_s=0.1)}
    assert [records[n]["attempts"] for n in "ab"] == [2, 2]
    assert [records[n]["earlier_seconds"] for n in "ab"] == [30.0, 20.0]
    for name, before in (("a", 30.0), ("b", 20.0)):
        took = records[name]["ended"] - records[name]["started"]
        assert records[name]["seconds"] == pytest.approx(before + took, abs=0.2)
    again = {r["name"]: r for r in run_steps([a, b], work, jobs=2, env=ENV, poll_s=0.1)}
    assert [(again[n]["status"], again[n]["attempts"], again[n]["seconds"]) for n in "ab"] == [
        ("skipped (done)", 2, records[n]["seconds"]) for n in "ab"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_failed_step_stops_new_starts_and_is_reported_in_one_line(kind, tmp_path):
    runs, work = tmp_path / "runs", tmp_path / "work"
    slow, bad = stub("slow", runs, sleep=1.5), stub("bad", runs, fail="rl.eval_tasks selects no tasks")
    later, other = stub("later", runs, after=["bad"]), stub("other", runs)
    with pytest.raises(StepFailed) as err:
        run_steps([slow, bad, later, other], work, jobs=2, env=ENV, poll_s=0.1, launcher=launcher(kind, tmp_path))
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("step bad failed (exit 2): chorus.stub: error: rl.eval_tasks selects no tasks (log: ")
    assert f"(log: {work / 'logs/bad.log'})" in message
    # the running step finished (its results stay valid); nothing started after the failure
    assert slow.done() and not later.run_dir.exists() and not other.run_dir.exists()
    saved = {r["name"]: r["status"] for r in json.loads((work / "steps.json").read_text())}
    assert saved == {"slow": "done", "bad": "failed (exit 2)", "later": "pending", "other": "pending"}


@pytest.mark.slow
def test_a_job_killed_under_its_step_fails_the_step_naming_submitits_logs(tmp_path):
    """SLURM kills a job at its time limit or on preemption: no exit status comes back."""
    runs, work = tmp_path / "runs", tmp_path / "work"
    killed = stub("killed", runs, kill_job=1)
    with pytest.raises(StepFailed) as err:
        run_steps([killed, stub("later", runs, after=["killed"])], work, env=ENV, poll_s=0.1,
                  launcher=launcher("submitit", tmp_path))
    message = str(err.value)
    assert "\n" not in message and message.startswith("step killed failed (no exit status): submitit job ")
    assert f"its logs: {tmp_path / 'submitit'}" in message and f"(log: {work / 'logs/killed.log'})" in message
    saved = {r["name"]: r["status"] for r in json.loads((work / "steps.json").read_text())}
    assert saved == {"killed": "failed (no exit status)", "later": "pending"}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/status").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()


@pytest.mark.slow
def test_cancelling_a_submitted_step_stops_the_step(tmp_path):
    """What Ctrl-C in the runner does to each running step (KeyboardInterrupt -> cancel), also for a
    runner started in the background by a script (`nohup ... &` leaves SIGINT ignored, which
    children inherit, and submitit's local executor cancels with SIGINT)."""
    pidfile = tmp_path / "pid"
    step = stub("long", tmp_path / "runs", sleep=60, pidfile=pidfile)
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        handle = launcher("submitit", tmp_path).start("long", step.argv(tmp_path / "h"), tmp_path / "long.log", ENV)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # the runner's own disposition is kept
    finally:
        signal.signal(signal.SIGINT, before)
    deadline = time.time() + 30
    while not pidfile.exists() and time.time() < deadline:
        time.sleep(0.1)
    pid = int(pidfile.read_text())
    handle.cancel()
    deadline = time.time() + 15
    while _alive(pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)


def test_submitit_settings_come_from_the_pipeline_config(tmp_path):
    """pipeline.submitit composes into the launcher: its folder under runs_dir, the local executor
    when asked, and the executor parameters as configured."""
    pytest.importorskip("submitit")
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from chorus.config.schema import CONF_DIR, register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        c = OmegaConf.to_container(compose(config_name="pipeline", overrides=[
            f"runs_dir={tmp_path}", "pipeline.launcher=submitit", "pipeline.submitit.cluster=local",
            "pipeline.submitit.timeout_min=30"]), resolve=True, enum_to_str=True)
    made = make_launcher(c["pipeline"]["launcher"], c["pipeline"]["submitit"])
    assert made.folder == f"{tmp_path}/pipeline/submitit" and made.executor.cluster == "local"
    assert made.executor._executor.parameters["timeout_min"] == 30
    with pytest.raises(ValueError, match=r"pipeline.submitit.cluster=slurmm: AutoExecutor doesn't know"):
        make_launcher("submitit", {**c["pipeline"]["submitit"], "cluster": "slurmm"})


def test_without_submitit_the_pipeline_says_what_to_install(tmp_path):
    """A submitit that fails to import stands in for one not installed; the default launcher never imports it."""
    (tmp_path / "fake/submitit").mkdir(parents=True)
    (tmp_path / "fake/submitit/__init__.py").write_text("raise ImportError('no submitit here')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "fake"), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-m", "chorus.pipeline", f"runs_dir={tmp_path / 'runs'}",
                        "pipeline.launcher=submitit"], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 2 and p.stderr.strip() == f"chorus.pipeline: error: {MISSING_SUBMITIT}"
    assert not (tmp_path / "runs/sft").exists()
    p = subprocess.run([sys.executable, "-c", "import chorus.pipeline, chorus.workflow.runner, chorus.train"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr


def test_a_step_the_cluster_refuses_fails_with_sbatchs_error(tmp_path, monkeypatch):
    """pipeline.submitit.* become the job's #SBATCH lines; sbatch's refusal is the step's one-line error
    (a stand-in sbatch keeps the script and refuses it, as a cluster without that partition does)."""
    pytest.importorskip("submitit")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 1\n")  # submitit looks for it to tell it is on SLURM
    (bin_dir / "sbatch").write_text(f'#!/bin/sh\nfor a; do last=$a; done\ncp "$last" {tmp_path}/job.sh\n'
                                    'echo "sbatch: error: invalid partition specified: gpux" >&2\nexit 1\n')
    for f in ("srun", "sbatch"):
        (bin_dir / f).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    settings = SubmititConf(cluster="slurm", folder=str(tmp_path / "submitit"), slurm_partition="gpux",
                            gpus_per_node=1, slurm_additional_parameters={"account": "proj"})
    runs, work = tmp_path / "runs", tmp_path / "work"
    with pytest.raises(StepFailed) as err:
        run_steps([stub("sft/stage0", runs), stub("rl/stage0", runs, after=["sft/stage0"])], work, env=ENV,
                  poll_s=0.1, launcher=make_launcher("submitit", dataclasses.asdict(settings)))
    assert str(err.value).startswith("step sft/stage0 failed (no exit status): submitit could not submit it: "
                                     "sbatch: error: invalid partition specified: gpux (pipeline.submitit.*)")
    script = (tmp_path / "job.sh").read_text()
    for line in ("--partition=gpux", "--gpus-per-node=1", "--account=proj", "--time=1440", "--job-name=sft/stage0"):
        assert f"#SBATCH {line}\n" in script, script


@pytest.mark.slow
def test_a_job_that_cannot_start_its_step_names_why(tmp_path):
    """run_logged raising inside the job (here: the step's log folder is not there, as on a node
    without the filesystem the runner writes to) is a failure with the job's own last line."""
    handle = launcher("submitit", tmp_path).start("x", [sys.executable, "-c", "pass"], tmp_path / "no/x.log", ENV)
    deadline = time.time() + 60
    while handle.ended() is None and time.time() < deadline:
        time.sleep(0.2)
    end = handle.ended()
    assert end.code is None and "failed: FileNotFoundError: " in end.why and "no/x.log" in end.why
    assert end.why.endswith(f"its logs: {tmp_path / 'submitit'}")


@pytest.mark.parametrize("code, status", [(0, "failed (exit 0 without its results)"), (143, "preempted (SIGTERM)"),
                                          (130, "preempted (SIGINT)"), (-9, "preempted (SIGKILL)")])
def test_a_step_is_done_only_with_its_results_and_a_signalled_one_is_preempted(code, status, tmp_path):
    runs, work = tmp_path / "runs", tmp_path / "work"
    step = stub("rl", runs, **({"exit": code} if code >= 0 else {"sleep": 30, "pidfile": tmp_path / "pid"}))
    if code < 0:  # killed from outside while it runs
        threading.Thread(target=_kill_when_started, args=(tmp_path / "pid", -code), daemon=True).start()
    with pytest.raises(StepFailed) as err:
        run_steps([step, stub("later", runs, after=["rl"])], work, env=ENV, poll_s=0.1)
    assert str(err.value).startswith(f"step rl {status}: ")
    if status.startswith("preempted"):
        assert "it resumes from its last checkpoint" in str(err.value)
    assert not step.done() and not (runs / "later").exists()


def _kill_when_started(pidfile: Path, signum: int) -> None:
    for _ in range(2400):  # up to 120 s: a loaded machine can take many seconds to start the step
        if pidfile.exists() and pidfile.read_text():
            os.kill(int(pidfile.read_text()), signum)
            return
        time.sleep(0.05)


def test_a_stopped_job_gives_its_step_time_to_save_and_is_requeued_by_submitit(tmp_path):
    """A SLURM pre-emption or timeout interrupts run_logged: the step gets SIGTERM and time to end
    its training step with a checkpoint; submitit requeues the job with the same arguments."""
    submitit = pytest.importorskip("submitit")
    from chorus.workflow.launchers import RunLogged

    args = (["python", "-m", "step_stub"], str(tmp_path / "log"), {}, str(tmp_path))
    again = RunLogged().checkpoint(*args)
    assert isinstance(again, submitit.helpers.DelayedSubmission) and isinstance(again.function, RunLogged)
    assert again.args == args

    marker, pidfile = tmp_path / "saved", tmp_path / "pid"
    step = [sys.executable, "-m", "step_stub", f"out={tmp_path / 'run'}", "sleep=30", f"on_term={marker}",
            f"pidfile={pidfile}"]
    driver = subprocess.Popen([sys.executable, "-c", "import sys; from chorus.workflow.launchers import run_logged; "
                               f"sys.exit(run_logged({step!r}, {str(tmp_path / 'log')!r}, {ENV!r}, {str(tmp_path)!r}))"],
                              stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120  # the step must be running (its SIGTERM handler set) before it is stopped;
    while not (pidfile.exists() and pidfile.read_text()):  # a loaded machine can take many seconds to start it
        assert time.monotonic() < deadline and driver.poll() is None, "the step never started"
        time.sleep(0.05)
    driver.send_signal(signal.SIGINT)  # what submitit's local executor sends a job it stops
    driver.communicate(timeout=30)
    assert marker.read_text() == "saved"  # the step ended its work before the job went
