"""How the pipeline's runner starts a step: `local` runs it as a subprocess of this process,
`submitit` as a submitit job (SLURM where srun is found, else a local process). A launcher starts a
step's command line with its log and hands back a handle to poll for the end and to cancel; which
steps start when, resume, failures and steps.json stay in runner.py, the same for every launcher.

A submitit job runs `run_logged`, which starts the same command line as a subprocess inside the job,
so the step sees the job's own environment (SLURM's variables, the GPUs the job was given) and the
runner reads its log, progress and error.txt exactly as it does for a local step."""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

try:  # the slurm extra; without it the submitit launcher is refused (MISSING_SUBMITIT)
    from submitit.helpers import Checkpointable
except ImportError:
    Checkpointable = object

MISSING_SUBMITIT = "pipeline.launcher=submitit needs submitit: pip install 'chorus[slurm]'"


@dataclass
class Ended:
    code: int | None  # the step's exit status; None when the launcher lost the step (killed, timed out)
    why: str = ""  # with code None: the launcher's one-line account, naming where its own logs are


class StepHandle(Protocol):
    def ended(self) -> Ended | None:  # None while the step runs (or waits in a queue)
        ...

    def cancel(self) -> None:
        ...


class Launcher(Protocol):
    def start(self, name: str, argv: list[str], log: Path, env: dict) -> StepHandle:
        """Start `argv` with its output into `log` and `env` on top of the environment it runs in."""
        ...


def _start(argv: list[str], log: Path, env: dict, cwd: str | None = None, preexec=None) -> subprocess.Popen:
    """The step in a session of its own, so that stopping it stops what it started (simulator
    workers, DDP ranks); its environment is this process's with the runner's additions on top."""
    with open(log, "w") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env}, cwd=cwd,
                                start_new_session=True, preexec_fn=preexec)


def _terminate_with(parent: int):
    """For a step started inside a submitit job: the kernel sends it SIGTERM when the job's process
    dies, however it dies. A backstop to run_logged's own stop: submitit's local executor SIGKILLs
    a cancelled job one second after its SIGINT, so a job slow to handle the SIGINT would otherwise
    leave its step (in a session of its own) running; SLURM's scancel kills the job's whole cgroup
    anyway. Linux only (prctl); elsewhere the SIGINT path is all there is."""
    if not sys.platform.startswith("linux"):
        return None

    def arm() -> None:  # runs in the child between fork and exec
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the job died before the request was armed
            os.kill(os.getpid(), signal.SIGTERM)
    return arm


class LocalStep:
    def __init__(self, argv: list[str], log: Path, env: dict):
        self.proc = _start(argv, log, env)

    def ended(self) -> Ended | None:
        code = self.proc.poll()
        return None if code is None else Ended(code)

    def cancel(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)


class LocalLauncher:
    def start(self, name: str, argv: list[str], log: Path, env: dict) -> LocalStep:
        return LocalStep(argv, log, env)


STOP_GRACE_S = 60  # how long a stopped job waits for its step to save its checkpoint and end


def run_logged(argv: list[str], log: str, env: dict, cwd: str) -> int:
    """A submitit job's body (module level, so it pickles by reference): the step as a subprocess,
    its output into the step's log; returns its exit status. Stopping the job (cancel, timeout,
    pre-emption) interrupts the wait here: the step gets SIGTERM, which ends a training step with a
    checkpoint (rl/preemption.py), and up to STOP_GRACE_S to exit before the job goes."""
    proc = _start(argv, Path(log), env, cwd, preexec=_terminate_with(os.getpid()))
    try:
        return proc.wait()
    except BaseException:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        raise


class RunLogged(Checkpointable):
    """run_logged as submitit's checkpointable callable: on a pre-emption or a timeout submitit
    requeues the job with the same arguments (Checkpointable.checkpoint), and the step, run again,
    resumes from the checkpoint its SIGTERM left. The pipeline keeps waiting on the same job."""

    def __call__(self, argv: list[str], log: str, env: dict, cwd: str) -> int:
        return run_logged(argv, log, env, cwd)


@contextlib.contextmanager
def _interruptible_children():
    """Submitit's local executor cancels a job with SIGINT to the process it starts here, and an
    ignored signal stays ignored across exec: a runner started in the background by a
    non-interactive shell (`nohup ... &`, which sets SIGINT to SIG_IGN) would start jobs that cannot
    be cancelled. So children are started with Python's own SIGINT handler in place, which exec
    resets to the default; the runner's own disposition comes back afterwards."""
    ignored = threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


class SubmititStep:
    def __init__(self, job):
        self.job = job
        self.end: Ended | None = None

    def ended(self) -> Ended | None:
        from submitit.core.utils import FailedJobError, UncompletedJobError

        if self.end is None and self.job.done():
            job, logs = self.job, f"its logs: {self.job.paths.folder}"
            try:
                self.end = Ended(int(job.result()))
            except FailedJobError as exc:  # run_logged raised (the step's log could not be opened there?)
                parts = str(exc).split("-" * 22)  # submitit's message holds the job's traceback between rules
                trace = parts[1] if len(parts) > 2 else str(exc)
                said = [ln.strip() for ln in trace.splitlines() if ln.strip()] or ["?"]
                self.end = Ended(None, f"submitit job {job.job_id} failed: {said[-1]}; {logs}")
            except UncompletedJobError:  # no result at all (submitit first waits a while for a lagging filesystem)
                self.end = Ended(None, f"submitit job {job.job_id} ended ({job.state}) before the step did: "
                                       f"killed, timed out or cancelled? {logs}")
        return self.end

    def cancel(self) -> None:
        self.job.cancel(check=False)


@dataclass
class Refused:
    """A step the cluster would not take (sbatch's error): failed before it started."""
    end: Ended

    def ended(self) -> Ended:
        return self.end

    def cancel(self) -> None:
        pass


class SubmititLauncher:
    def __init__(self, folder: str, cluster: str | None, parameters: dict):
        """`parameters`: submitit executor parameters (timeout_min, slurm_partition, ...); None values
        are left out, so the cluster's defaults apply."""
        try:
            import submitit
        except ImportError:
            raise ValueError(MISSING_SUBMITIT) from None
        try:
            self.executor = submitit.AutoExecutor(folder=folder, cluster=cluster)
        except (ValueError, RuntimeError) as exc:  # an unknown pipeline.submitit.cluster, or none found
            raise ValueError(f"pipeline.submitit.cluster={cluster}: {exc}") from None
        self.executor.update_parameters(**{k: v for k, v in parameters.items() if v is not None})
        self.folder = folder

    def start(self, name: str, argv: list[str], log: Path, env: dict) -> SubmititStep | Refused:
        from submitit.core.utils import FailedJobError

        self.executor.update_parameters(name=name)  # the job's name in squeue
        try:
            with _interruptible_children():
                return SubmititStep(self.executor.submit(RunLogged(), argv, str(log), env, os.getcwd()))
        except (FailedJobError, OSError) as exc:  # sbatch refused the job (its stderr), or is not there
            said = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
            return Refused(Ended(None, f"submitit could not submit it: {said} (pipeline.submitit.*)"))


def make_launcher(kind: str, submitit: dict) -> Launcher:
    """`local`, or `submitit` with pipeline.submitit's settings (cluster, folder and executor parameters)."""
    if kind == "local":
        return LocalLauncher()
    if kind == "submitit":
        settings = dict(submitit)
        return SubmititLauncher(settings.pop("folder"), settings.pop("cluster"), settings)
    raise ValueError(f"unknown pipeline.launcher {kind!r}; use local or submitit")
