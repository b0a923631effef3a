"""How the pipeline's runner starts a step: `local` runs it as a subprocess of this process,
`submitit` as a submitit job (SLURM where srun is found, else a local process). A launcher starts a
step's command line with its log and hands back a handle to poll for the end and to cancel; which
steps start when, resume, failures and steps.json stay in runner.py, the same for every launcher.

A submitit job runs `run_logged`, which starts the same command line as a subprocess inside the job,
so the step sees the job's own environment (SLURM's variables, the GPUs the job was given) and the
runner reads its log, progress and error.txt exactly as it does for a local step."""
from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

MISSING_SUBMITIT = "pipeline.launcher=submitit needs submitit: pip install 'chorus[slurm]'"


@dataclass
class Ended:
    code: int | None  # the step's exit status; None when the launcher lost the step (killed, timed out)
    why: str = ""  # with code None: the launcher's one-line account, naming where its own logs are


def _start(argv: list[str], log: Path, env: dict, cwd: str | None = None) -> subprocess.Popen:
    """The step in a session of its own, so that stopping it stops what it started (simulator
    workers, DDP ranks); its environment is this process's with the runner's additions on top."""
    with open(log, "w") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env}, cwd=cwd,
                                start_new_session=True)


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


def run_logged(argv: list[str], log: str, env: dict, cwd: str) -> int:
    """A submitit job's body (module level, so it pickles by reference): the step as a subprocess,
    its output into the step's log; returns its exit status. Stopping the job (cancel, timeout)
    interrupts the wait here, which stops the step before the job goes."""
    proc = _start(argv, Path(log), env, cwd)
    try:
        return proc.wait()
    except BaseException:
        os.killpg(proc.pid, signal.SIGTERM)
        raise


class SubmititStep:
    def __init__(self, job):
        self.job = job
        self.end: Ended | None = None

    def ended(self) -> Ended | None:
        from submitit.core.utils import FailedJobError, UncompletedJobError

        if self.end is None and self.job.done():
            try:
                self.end = Ended(int(self.job.result()))
            except (FailedJobError, UncompletedJobError):  # the job ended without run_logged's return value
                # (submitit waits for it for a while first, in case the shared filesystem lags)
                self.end = Ended(None, f"submitit job {self.job.job_id} ended ({self.job.state}) before the step "
                                       f"did: killed, timed out or cancelled? its logs: {self.job.paths.folder}")
        return self.end

    def cancel(self) -> None:
        self.job.cancel(check=False)


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

    def start(self, name: str, argv: list[str], log: Path, env: dict) -> SubmititStep:
        self.executor.update_parameters(name=name)  # the job's name in squeue
        return SubmititStep(self.executor.submit(run_logged, argv, str(log), env, os.getcwd()))


def make_launcher(kind: str, submitit: dict | None = None) -> LocalLauncher | SubmititLauncher:
    """`local`, or `submitit` with pipeline.submitit's settings (cluster, folder and executor parameters)."""
    if kind == "local":
        return LocalLauncher()
    if kind == "submitit":
        settings = dict(submitit or {})
        return SubmititLauncher(settings.pop("folder"), settings.pop("cluster"), settings)
    raise ValueError(f"unknown pipeline.launcher {kind!r}; use local or submitit")
