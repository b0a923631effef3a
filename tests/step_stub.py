"""A stand-in pipeline step for the runner's tests: `python -m step_stub key=value ...` with
out=<run dir> (it ends by writing summary.json there, with when it started and ended), sleep=<s>,
fail=<message> (a job's one-line error, exit 2), exit=<code> (ends with that status, no results),
pidfile=<path> (its pid, once started), on_term=<path> (on SIGTERM: a second's work, then that file
and exit 143, as a training step saving its checkpoint) and kill_job=1 (SIGKILL to the process that started it: a submitit job killed under its step, as SLURM
does at a timeout). Other arguments (the runner's hydra.run.dir=...) are ignored."""
import json
import os
import signal
import sys
import time
from pathlib import Path

args = dict(a.split("=", 1) for a in sys.argv[1:])
start = time.time()
if "on_term" in args:
    def _saved(signum, frame):
        time.sleep(1)
        Path(args["on_term"]).write_text("saved")
        sys.exit(128 + signum)
    signal.signal(signal.SIGTERM, _saved)
if "pidfile" in args:
    Path(args["pidfile"]).write_text(str(os.getpid()))
time.sleep(float(args.get("sleep", 0)))
if "kill_job" in args:
    os.kill(os.getppid(), signal.SIGKILL)
    sys.exit(0)  # a status nobody reads: the job that would have returned it is gone
if "exit" in args:
    sys.exit(int(args["exit"]))
if "fail" in args:
    print(f"chorus.stub: error: {args['fail']}", file=sys.stderr)
    sys.exit(2)
out = Path(args["out"])
out.mkdir(parents=True, exist_ok=True)
(out / "summary.json").write_text(json.dumps({"start": start, "end": time.time()}))
