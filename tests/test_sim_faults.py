"""Faults and inputs around the simulator: forged or unwritable caches, killed runs, bad task
files, paths out of policy.dir, malformed samples. Each is one sample's status or one line."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from chorus.policy.static import from_files
from chorus.sim import SimConfig, SimResult, simulate
from chorus.sim.cache import ResultCache, usable_root
from chorus.sim.coverage import CoverageReport
from chorus.sim.workdirs import run_dir, sweep_stale
from chorus.stimulus.formats import score
from chorus.tasks import load_tasks
from chorus.core.task import Task, TaskFormatError, read_jsonl

from helpers import counter_tb


def test_a_forged_cache_entry_is_ignored(tmp_path):
    cache = ResultCache(tmp_path)
    honest = SimResult("ok", report=CoverageReport("TOP.tb.uut", True, {"block": 59.5}, overall=59.5))
    cache.put("ab" * 32, honest)
    assert cache.get("ab" * 32).overall == 59.5
    path = tmp_path / "results" / "ab" / f"{'ab' * 32}.json"
    entry = json.loads(path.read_text())
    entry["result"] = entry["result"].replace("59.5", "100.0")  # what a rewrite of the cache would do
    path.write_text(json.dumps(entry))
    assert cache.get("ab" * 32) is None
    (tmp_path / "results" / "cd").mkdir()
    (tmp_path / "results" / "cd" / f"{'cd' * 32}.json").write_text(json.dumps({"result": "{}", "mac": "0" * 64}))
    assert cache.get("cd" * 32) is None  # an entry nobody keyed


def test_an_unwritable_cache_warns_once_and_runs_uncached(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    bad = str(blocker / "cache")  # under a regular file: cannot be created, even by root
    first, second = usable_root(bad), usable_root(bad)
    assert first == second and first.is_dir() and not str(first).startswith(str(blocker))
    assert capsys.readouterr().err.count("is not writable") == 1


@pytest.mark.slow
def test_simulation_with_an_unwritable_cache_still_scores(tmp_path, counter_task):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    r = simulate(counter_task, counter_tb("    repeat (20) @(posedge clk);\n    $finish;"),
                 SimConfig(cache=True, cache_dir=str(blocker / "cache")))
    assert r.status == "ok" and r.overall is not None


def test_work_dirs_of_dead_processes_are_swept():
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    stale = Path(tempfile.mkdtemp(prefix=f"chorus-sim-{dead}-", dir=run_dir()))  # a worker killed mid-job
    (stale / "obj").mkdir()
    mine = Path(tempfile.mkdtemp(prefix=f"chorus-sim-{os.getpid()}-", dir=run_dir()))
    try:
        assert sweep_stale.__wrapped__() >= 1
        assert not stale.exists() and mine.exists()
    finally:
        mine.rmdir()


def test_a_task_file_with_bad_utf8_names_the_file_and_line(tmp_path):
    f = tmp_path / "tasks.jsonl"
    good = json.dumps({"id": "a", "spec": "s", "rtl": {"a.sv": "module a; endmodule"}, "top": "a", "instance": "u"})
    f.write_bytes(good.encode() + b"\n" + b'{"id": "b\xff"}\n')
    with pytest.raises(TaskFormatError, match=rf"{f}:2: not valid UTF-8 at byte 9 .*re-encode"):
        read_jsonl(f)


def test_trust_comes_from_the_loader_never_from_the_task_file(tmp_path):
    f = tmp_path / "tasks.jsonl"
    row = {"id": "a", "spec": "s", "rtl": {"a.sv": "module a; endmodule"}, "top": "a", "instance": "u",
           "meta": {"trusted_rtl": True}}
    f.write_text(json.dumps(row) + "\n")
    assert load_tasks("jsonl", path=str(f))[0].meta["trusted_rtl"] is False
    assert load_tasks("jsonl", path=str(f), trusted=True)[0].meta["trusted_rtl"] is True


def test_policy_file_never_reads_outside_its_dir(tmp_path):
    secret = tmp_path / "secret.sv"
    secret.write_text("module leaked; endmodule")
    tbs = tmp_path / "tbs"
    tbs.mkdir()
    (tbs / "link.sv").symlink_to(secret)
    (tbs / "fine.sv").write_text("module tb; endmodule")

    def read(task_id):
        t = Task(id=task_id, spec="", rtl={"a.sv": ""}, top="a", instance="u")
        return from_files(t, dir=str(tbs))[0]

    assert read("fine") == "module tb; endmodule"
    assert read("../secret") is None and read("link") is None and read("..") is None


@pytest.mark.parametrize("text, why", [
    ("wait \u00b2", "cannot read '\u00b2'"),
    ("in0=1 x" + "9" * 5000, "cannot read 'x999"),
    ("in0=" + "9" * 5000, "cannot read value"),
    (". x\u0663", "cannot read"),  # an Arabic-Indic digit three
])
def test_a_malformed_vectors_sample_is_its_own_compile_error(text, why):
    task = load_tasks("generated", per_family=1)[0]
    r = score("vectors", task, text, SimConfig(cache=False))
    assert r.status == "compile_error" and why in r.reason, r.reason


def test_a_deeply_nested_cocotb_sample_is_its_own_compile_error():
    task = load_tasks("generated", per_family=1)[0]
    deep = "async def stimulus(dut):\n    x = " + "-" * 20_000 + "1\n    dut.in0.value = 1\n"  # under the size cap
    r = score("cocotb", task, deep, SimConfig(cache=False))
    assert r.status == "compile_error", r.reason


@pytest.mark.slow
def test_system_files_do_not_reach_the_logs(counter_task, sim_cfg):
    # /etc/passwd is not needed by any tool in the jail, so it is not readable there either.
    tb = '`include "/etc/passwd"\n' + counter_tb("    $finish;")
    r = simulate(counter_task, tb, sim_cfg)
    assert r.status == "compile_error" and "Cannot find include file" in r.reason
    assert "root:" not in r.reason + r.build_log + r.run_log


def _clean_env(tmp: Path) -> dict[str, str]:
    """A fresh run's environment: its own TMPDIR, and none of this test run's run dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHORUS_RUN")}
    tmp.mkdir(exist_ok=True)
    here = str(Path(__file__).resolve().parent.parent)  # this checkout's chorus, not an installed one
    return {**env, "TMPDIR": str(tmp), "CHORUS_NO_CCACHE": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [here, env.get("PYTHONPATH")]))}


def _under(pid: str, root: Path) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/cwd").startswith(str(root))
    except OSError:
        return False


def _builders(root: Path) -> list[str]:
    """Build processes (make, the compiler driver, cc1plus, Verilator) working under `root`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if comm in ("make", "c++", "g++", "cc1plus", "as", "ld", "verilator", "verilator_bin", "sh") and _under(pid, root):
            found.append(f"{pid} {comm}")
    return found


BUILD_RUN = """
import sys
from pathlib import Path
from chorus.sim import SimConfig
from chorus.sim.build import make_vars, verilator_flags
from chorus.sim.runtime import ensure_runtime
from chorus.sim.toolchain import find_toolchain
if __name__ == "__main__":
    cfg, tc = SimConfig(cache=False), find_toolchain()
    ensure_runtime(tc, verilator_flags(cfg), make_vars(cfg, tc), Path(sys.argv[1]))
"""


@pytest.mark.slow
def test_a_killed_run_takes_its_build_processes_down_with_it(tmp_path):
    script = tmp_path / "build.py"
    script.write_text(BUILD_RUN)
    tmp = tmp_path / "tmp"
    run = subprocess.Popen([sys.executable, str(script), str(tmp_path / "cache")], env=_clean_env(tmp))
    deadline = time.monotonic() + 120
    while not any("cc1plus" in b for b in _builders(tmp)) and time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.05)
    assert any("cc1plus" in b for b in _builders(tmp)), "the build never reached the C++ compiler"
    run.send_signal(signal.SIGKILL)
    run.wait()
    deadline = time.monotonic() + 3
    while _builders(tmp) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _builders(tmp) == []


TMP_RUN = """
import sys, time
from chorus.sim.executor import LocalExecutor
from chorus.sim.workdirs import new_workdir
if __name__ == "__main__":
    ex = LocalExecutor(1)
    print(ex.submit(new_workdir, "probe").result(), flush=True)  # a worker's work dir, and multiprocessing's
    if sys.argv[1] == "hang":
        time.sleep(600)
    ex.shutdown()
"""


@pytest.mark.slow
def test_a_run_keeps_its_temporaries_in_one_dir_removed_even_when_it_is_killed(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(TMP_RUN)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    killed = subprocess.Popen([sys.executable, str(script), "hang"], env=_clean_env(tmp), stdout=subprocess.PIPE,
                              text=True)
    probe = Path(killed.stdout.readline().strip())
    assert probe.parent.parent == tmp and probe.parent.name.startswith(f"chorus-run-{killed.pid}-")
    names = {p.name for p in tmp.iterdir()}
    assert probe.parent.name in names and len(names) == 2, names
    assert [n for n in names if n != probe.parent.name][0].startswith("pymp-")  # multiprocessing's, beside it
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    deadline = time.monotonic() + 5  # the watcher removes both at the killed run's end
    while list(tmp.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(tmp.iterdir()) == []
    # a run dir whose owner died with its watcher is swept by the next run
    stale = tmp / f"chorus-run-{killed.pid}-stale"
    (stale / "chorus-sim-1-x").mkdir(parents=True)
    normal = subprocess.run([sys.executable, str(script), "exit"], env=_clean_env(tmp), capture_output=True,
                            text=True, timeout=120)
    assert normal.returncode == 0 and normal.stderr == "", normal.stderr
    deadline = time.monotonic() + 5
    while list(tmp.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(tmp.iterdir()) == []


# Every build's C++ looks for what it includes and compiles beside its main first: a task file
# with such a name, or any .cpp, must never get into the simulation.
EVIL_CPP = "#error CHORUS_TASK_CPP_COMPILED\n"
NOT_SV = {"verilated.h": EVIL_CPP, "verilated.cpp": EVIL_CPP, "rtl/evil.cpp": EVIL_CPP, "Vtop.h": EVIL_CPP,
          "verilator.cpp": EVIL_CPP, "chorus_main.cpp": EVIL_CPP}


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["testbench", "vectors", "cocotb"])
def test_a_task_file_that_is_not_systemverilog_is_never_compiled(fmt, cache_root):
    from test_cocotb_format import GOOD, RTL

    task = Task(id="codelock", spec="lock", rtl={"codelock.sv": RTL, **NOT_SV}, top="codelock", instance="lock_i")
    cfg = SimConfig(cache=False, cache_dir=str(cache_root), run_timeout_s=20)
    tb = """module tb; logic clk = 0, rst = 1, key_valid = 0; logic [3:0] key = 0; logic open; logic [1:0] stage;
  codelock lock_i(.*); always #5 clk = ~clk;
  initial begin #12 rst = 0; key_valid = 1; key = 3; #10 key = 7; #10 key = 1; #20 $finish; end
endmodule
"""
    sample = {"testbench": tb, "vectors": "rst\nin0=1 in1=3\nin1=7\nin1=1\n", "cocotb": GOOD}[fmt]
    r = score(fmt, task, sample, cfg)
    assert r.status == "ok" and r.overall is not None, r.reason
    assert "CHORUS_TASK_CPP_COMPILED" not in r.build_log + r.reason
