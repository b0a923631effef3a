"""What chorus's Hydra entry points (chorus.train, chorus.evaluate) share at the start of `main`.

An entry point composes its config (Hydra), checks it and calls the library; only entry points know
Hydra. Each runs its body inside `entry_point(name)`: third-party chatter quietened, Hydra's run dir
and the command line's overrides at hand, and an error that is the user's to fix (a setting, a task
file, a path: TaskFormatError, ValueError, OSError) said in one line, `<name>: error: <first line>`,
recorded in the run dir's error.txt, exit status 2. A pre-emption (config.job_context.Preempted) is
never a finished run: said and recorded alike, it exits with its own status, so that the pipeline
re-runs (resumes) the job.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, NoReturn

from hydra.core.hydra_config import HydraConfig

from .config.job_context import Preempted
from .core.task import TaskFormatError
from .tracking.quiet import quiet_third_party
from .tracking.record import write_error

USAGE_ERROR = 2  # the exit status of an error the user fixes (a pre-emption has its own)


@dataclass(frozen=True)
class Entry:
    out_dir: Path  # Hydra's run dir (hydra.run.dir): .hydra/ and, after an error, error.txt
    overrides: list[str]  # the command line's overrides, as given


@contextmanager
def entry_point(name: str) -> Iterator[Entry]:
    """`with entry_point("chorus.train") as entry:` around the body of a Hydra main (see the module)."""
    quiet_third_party()
    hydra = HydraConfig.get()
    entry = Entry(Path(hydra.runtime.output_dir), list(hydra.overrides.task))
    try:
        yield entry
    except (TaskFormatError, ValueError, OSError) as exc:  # ModelLoadError and PromptTooLong are ValueErrors
        stop(name, entry.out_dir, exc, str(exc).splitlines()[0], USAGE_ERROR)
    except Preempted as exc:
        stop(name, entry.out_dir, exc, str(exc), exc.exit_code)


def stop(name: str, out_dir: Path, exc: BaseException, line: str, status: int) -> NoReturn:
    print(f"{name}: error: {line}", file=sys.stderr)
    write_error(out_dir, exc)
    sys.exit(status)
