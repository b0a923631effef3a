"""The cocotb stimulus runs in a locked-down process of its own (child/main.py), served by the
harness over a pipe. Whatever gets past the AST check cannot write a file, read one, open a
socket, signal the simulator or change the coverage, and the harness refuses what the stimulus
may not drive. Real Verilator, cocotb and kernel; nothing mocked."""
import dataclasses
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chorus.stimulus.aliases import alias_map
from chorus.stimulus.cocotb_stimulus import check_stimulus, child, run_cocotb
from chorus.stimulus.formats import score
from test_cocotb_format import GOOD, HEAD, assert_same_coverage, task  # noqa: F401 (task: the codelock fixture, shared)

CHILD = Path(child.__file__).parent  # the child's modules import each other by bare name
SECRET = "chorus-secret-7f3a9c"
# Reaches the os module from inside the stimulus process without any import (the AST check
# rejects this; run_cocotb is called directly to play a check that missed it).
ESCAPE = """\
    osd = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == "_wrap_close"][0].__init__.__globals__

    def attempt(name, fn):
        try:
            print("ATTACK", name, "ok", fn())
        except Exception as e:
            print("ATTACK", name, "failed", e.__class__.__name__)

"""
HONEST = HEAD + """async def stimulus(dut):
    dut.in0.value = 1
    dut.in1.value = 3
    await FallingEdge(dut.clk)
    dut.in1.value = 7
    await FallingEdge(dut.clk)
#ATTACK
    dut.in1.value = 1
    await ClockCycles(dut.clk, 3, rising=False)
"""


def _line(text: str, snippet: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if snippet in ln)


def _attack(lines: str) -> str:
    return HONEST.replace("#ATTACK\n", ESCAPE + "".join(f"    {ln}\n" for ln in lines.strip().splitlines()))


@pytest.mark.parametrize("escape", [
    "    t = cocotb.triggers\n    os = t.warnings.sys.modules['os']\n",  # a module kept in a variable
    "    os = [cocotb.triggers][0].warnings.sys.modules['os']\n",  # ... in a list
    "    f = lambda m=cocotb.triggers: m.warnings.sys\n",  # ... as a lambda default
    "    print('{0.cr_frame.f_globals}'.format(stimulus(dut)))\n",  # str.format reads attributes itself
])
def test_escapes_that_passed_the_old_check_are_rejected(task, escape):
    r = check_stimulus("import cocotb.triggers\n" + GOOD + escape, alias_map(task))
    assert r is not None and r.status == "rejected", r and r.reason


def test_the_child_locks_itself_down(tmp_path):
    """Run the child's lockdown, then raw code with os (no AST check, no restricted builtins)."""
    (tmp_path / "secret.txt").write_text(SECRET)
    (tmp_path / "coverage.dat").write_text("# real coverage\n")
    code = f"""
import ctypes, json, os, resource, sys
sys.path.insert(0, {str(CHILD)!r})
import lockdown
out = {{"granted": lockdown.lockdown()}}
libc = ctypes.CDLL(None, use_errno=True)

def attempt(name, fn):
    try:
        out[name] = "ok " + repr(fn())[:60]
    except BaseException as e:
        out[name] = type(e).__name__

def tcp():
    fd = libc.socket(2, 1, 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "socket")
    return fd

tmp = {str(tmp_path)!r}
os.close(0)  # one free descriptor: the file attempts below meet Landlock, not the descriptor limit
attempt("write_new_file", lambda: open(tmp + "/new.txt", "w"))
attempt("append_coverage", lambda: open(tmp + "/coverage.dat", "a"))
attempt("read_secret", lambda: open(tmp + "/secret.txt").read())
attempt("list_dir", lambda: os.listdir(tmp))
attempt("tcp_socket", tcp)
attempt("import_socket", lambda: __import__("socket"))
attempt("fork", lambda: os.fork() or os._exit(0))
attempt("exec", lambda: os.execv("/bin/sh", ["sh", "-c", "touch " + tmp + "/exec.txt"]))
attempt("raise_fd_limit", lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024)))
# Landlock does not cover these; the seccomp filter does
attempt("signal_parent", lambda: os.kill(os.getppid(), 0))
attempt("chmod", lambda: os.chmod(tmp + "/secret.txt", 0o777))
attempt("limit_parent", lambda: resource.prlimit(os.getppid(), resource.RLIMIT_FSIZE, (0, 0)))
os.write(1, json.dumps(out).encode())
"""
    p = subprocess.run([sys.executable, "-I", "-S", "-B", "-c", code], capture_output=True, text=True, timeout=60)
    out = json.loads(p.stdout)
    granted = out.pop("granted")
    if not granted["landlock_abi"]:
        pytest.skip(f"this kernel has no Landlock ({granted})")
    assert granted["no_new_privs"] and granted["capabilities_dropped"]
    if not granted["seccomp"]:  # not x86_64
        del out["signal_parent"], out["chmod"], out["limit_parent"]
    assert not [k for k, v in out.items() if v.startswith("ok")], out
    assert {out[k] for k in ("write_new_file", "append_coverage", "read_secret", "list_dir")} == {"PermissionError"}
    assert (tmp_path / "secret.txt").stat().st_mode & 0o777 != 0o777
    assert SECRET not in p.stdout + p.stderr
    assert sorted(f.name for f in tmp_path.iterdir()) == ["coverage.dat", "secret.txt"]
    assert (tmp_path / "coverage.dat").read_text() == "# real coverage\n"


@pytest.mark.slow
def test_an_escape_reaching_os_cannot_read_write_connect_or_forge_coverage(task, sim_cfg, tmp_path):
    (tmp_path / "secret.txt").write_text(SECRET)
    flags = "osd['O_WRONLY'] | osd['O_CREAT']"
    attack = _attack(f"""
attempt("getpid", osd["getpid"])
attempt("cwd", osd["getcwd"])
attempt("read_secret", lambda: osd["read"](osd["open"]({str(tmp_path / "secret.txt")!r}, 0), 100))
attempt("read_own_module", lambda: osd["read"](osd["open"]("stimulus.py", 0), 100))
attempt("write_outside", lambda: osd["open"]({str(tmp_path / "pwned.txt")!r}, {flags}, 420))
attempt("write_cwd", lambda: osd["open"]("pwned.txt", {flags}, 420))
for name in ("coverage.dat", "status.json", "../coverage.dat", "../out/coverage.dat"):
    attempt("overwrite " + name, lambda: osd["open"](name, {flags} | osd["O_APPEND"], 420))
attempt("tcp", lambda: osd["sys"].modules["ctypes"].CDLL(None).socket(2, 1, 0) >= 0 or 1 // 0)
attempt("fork", lambda: osd["fork"]() or osd["_exit"](0))
attempt("kill_simulator", lambda: osd["kill"](osd["getppid"](), 9))
attempt("limit_simulator", lambda: osd["sys"].modules["resource"].prlimit(osd["getppid"](), 1, (0, 0)))
attempt("chmod_run_dir", lambda: osd["chmod"](".", 0))
""")
    honest = score("cocotb", task, HONEST.replace("#ATTACK\n", ""), sim_cfg)
    attacked = run_cocotb(task, attack, dataclasses.replace(sim_cfg, keep_workdir=True), {})
    lines = [ln.split("ATTACK ", 1)[1] for ln in attacked.run_log.splitlines() if "ATTACK " in ln]
    cwd = Path(next(ln for ln in lines if ln.startswith("cwd ok")).split(" ok ", 1)[1])
    try:
        assert lines[0].startswith("getpid ok")  # the escape really reached os
        assert all(" failed " in ln for ln in lines[2:]) and len(lines) == 15, lines
        assert SECRET not in attacked.run_log + attacked.reason
        assert not (tmp_path / "pwned.txt").exists() and not (cwd / "pwned.txt").exists()
        assert_same_coverage(attacked, honest)
        assert json.loads((cwd.parent / "out" / "status.json").read_text())["isolation"]["landlock_abi"] >= 1
    finally:
        shutil.rmtree(cwd.parent, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.parametrize("forged, refused", [
    ('{"op": "wait", "specs": [["fall", "clk", 1]], "writes": [["clk", 0]]}', "asked to drive clk"),
    ('{"op": "done", "writes": [["out0", 1]]}', "asked to drive out0"),
    ('{"op": "wait", "specs": [["fall", "clk", 1]], "writes": [["in1", "01"]]}', "bad value for in1"),
    ('{"op": "shell", "cmd": "rm -rf /"}', "unknown op 'shell'"),
    ('not json at all', "not a JSON object"),
    ('{"op": "wait", "specs": [' + ", ".join(['["ro"]'] * 100) + '], "writes": []}', "a malformed wait (a list of 100"),
])
def test_forged_protocol_messages_are_refused(task, sim_cfg, forged, refused):
    text = _attack(f"osd['write'](1, {forged!r}.encode() + bytes([10]))\nawait FallingEdge(dut.clk)")
    r = run_cocotb(task, text, sim_cfg, {})
    assert r.status == "runtime_error" and refused in r.reason and r.overall is not None, r.reason


@pytest.mark.slow
@pytest.mark.parametrize("alias, message", [("out0", "out0 is not drivable"), ("clk", "clk is driven by chorus")])
def test_writes_to_outputs_or_the_clock_are_refused(task, sim_cfg, alias, message):
    text = HONEST.replace("#ATTACK\n", f"    h = dut.{alias}\n    h.value = 0\n")  # the AST check cannot see it
    r = score("cocotb", task, text, sim_cfg)
    assert r.status == "runtime_error", r.reason
    assert f"TypeError at line {_line(text, 'h.value = 0')}: {message}" in r.reason


@pytest.mark.slow
@pytest.mark.parametrize("lines, raised", [
    ("raise ValueError('no such code')", "raise ValueError('no such code')"),
    ("cocotb.start_soon(helper(dut))\nawait ClockCycles(dut.clk, 4)", "raise ValueError('from a task')"),
])
def test_an_exception_names_its_line(task, sim_cfg, lines, raised):
    helper = "async def helper(dut):\n    await FallingEdge(dut.clk)\n    raise ValueError('from a task')\n\n\n"
    text = "import cocotb\n" + HONEST.replace("#ATTACK\n", "".join(f"    {ln}\n" for ln in lines.splitlines()))
    text = text.replace("async def stimulus", helper + "async def stimulus")
    r = score("cocotb", task, text, sim_cfg)
    message = raised.split("'")[1]
    assert r.status == "runtime_error" and r.end == "exception", r.reason
    assert f"ValueError at line {_line(text, raised)}: {message}" in r.reason
    assert "coverage up to that point is kept" in r.reason and r.overall is not None


@pytest.mark.slow
def test_a_stimulus_that_never_awaits_times_out_with_coverage(task, sim_cfg):
    cfg = dataclasses.replace(sim_cfg, run_timeout_s=7)  # 2 s of it for the stimulus
    t = time.monotonic()
    r = score("cocotb", task, HONEST.replace("#ATTACK\n", "    while True:\n        pass\n"), cfg)
    assert r.status == "timeout" and r.end == "wall_clock" and r.overall is not None, r.reason
    assert time.monotonic() - t < cfg.run_timeout_s


@pytest.mark.slow
def test_the_stand_in_answers_like_cocotb(task, sim_cfg):
    """Reads, tasks, First/Combine, phases and LogicArray, against values real cocotb printed for
    the same module when it ran in the simulator process."""
    text = """import cocotb
from cocotb.triggers import ClockCycles, Combine, Event, FallingEdge, First, ReadOnly, RisingEdge, Timer
from cocotb.types import LogicArray
from cocotb.utils import get_sim_time


async def toggler(dut, ev):
    for i in range(3):
        await RisingEdge(dut.clk)
    ev.set()
    return 42


async def stimulus(dut):
    ev = Event()
    t = cocotb.start_soon(toggler(dut, ev))
    dut.in0.value = 1
    dut.in1.value = 3
    print("T", int(dut.in1.value))  # not yet applied
    await FallingEdge(dut.clk)
    print("T", get_sim_time("ns"), str(dut.out1.value), dut.out0.value == 0)
    dut.in1.value = 7
    await ClockCycles(dut.clk, 1, rising=False)
    dut.in1.value = 1
    r = await First(Timer(3, "ns"), FallingEdge(dut.clk))
    print("T", "Timer" in repr(r), get_sim_time("ns"))
    await FallingEdge(dut.clk)
    print("T", int(dut.out0.value), get_sim_time("ns"))
    await ev.wait()
    print("T", get_sim_time("ns"), await t)
    await Combine(Timer(7, "ns"), ClockCycles(dut.clk, 2))
    await ReadOnly()
    print("T", get_sim_time("ns"), dut.out1.value[1], str(LogicArray(5, 4) & LogicArray("0110")))
    await FallingEdge(dut.clk)
"""
    r = score("cocotb", task, text, sim_cfg)
    assert r.status == "ok", r.reason
    got = [ln.split("T ", 1)[1] for ln in r.run_log.splitlines() if ln.startswith("T ")]
    assert got == ["0", "30.0 01 True", "True 43.0", "1 50.0", "50.0 42", "65.0 0 0100"], got
