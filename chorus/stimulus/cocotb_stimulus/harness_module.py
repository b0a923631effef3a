"""chorus cocotb harness: clock, reset, then the stimulus functions under a time limit.

This file runs inside the simulator as the only cocotb test module (run.py copies it into
each run directory); chorus itself never imports it.
"""
import ast, builtins, errno, json, os, random, signal, traceback
import cocotb
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.task import CancelledError
from cocotb.triggers import FallingEdge, First, Timer

_CFG = json.loads(os.environ.pop("CHORUS_COCOTB"))
_STATUS = os.environ.pop("CHORUS_STATUS_OUT")
_REAL_IMPORT = builtins.__import__
# Past the output limit, writes fail with an error the stimulus sees instead of killing the run.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _import(name, globals=None, locals=None, fromlist=(), level=0):
    if level or name.split(".")[0] not in ("cocotb", "random", "math"):
        raise ImportError(f"import of {name!r} is not allowed")
    return _REAL_IMPORT(name, globals, locals, fromlist, level)


class _Stuck(BaseException):
    """Raised into stimulus that keeps Python busy without awaiting (stimulus cannot catch it)."""


_LATE = []


def _alarm(signum, frame):
    # Past the wall-clock budget. Raise only inside stimulus code: raising in cocotb's own
    # callbacks crashes the simulator. Otherwise the watchdog below ends the run.
    _LATE.append(True)
    while frame is not None:
        if frame.f_code.co_filename == "stimulus.py":
            raise _Stuck()
        frame = frame.f_back


def _write(end, error=""):
    with open(_STATUS, "w") as f:
        json.dump({"end": end, "error": error, "time_ns": get_sim_time("ns")}, f)


def _describe(exc):
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == "stimulus.py":
            line = lineno
    where = f" at line {line}" if line else ""
    return f"{type(exc).__name__}{where}: {exc}".splitlines()[0][:300]


def _load():
    with open(_CFG["stimulus"]) as f:
        tree = ast.parse(f.read(), "stimulus.py")
    names = []
    for node in tree.body:
        if isinstance(node, ast.AsyncFunctionDef) and (node.name.startswith("stimulus") or node.decorator_list):
            node.decorator_list = []
            names.append(node.name)
    safe = {n: getattr(builtins, n) for n in _CFG["builtins"]}
    ns = {"__name__": "stimulus", "__builtins__": {**safe, "__import__": _import}}
    exec(compile(tree, "stimulus.py", "exec"), ns)
    return [ns[n] for n in names]


async def _run(dut, funcs):
    try:
        for func in funcs:
            await func(dut)
    except CancelledError:
        raise
    except BaseException as exc:  # returned, not raised: an errored task would end the test
        return exc
    return None


async def _watch(limit_ns):
    while not _LATE:
        now = get_sim_time("ns")
        if now >= limit_ns - 1e-6:
            return "max_time"
        await Timer(min(_CFG["watch_ns"], limit_ns - now), "ns")
    return "wall_clock"


def _outcome(exc):
    if exc is None or type(exc).__name__ == "EndTest":  # cocotb.end_test(): a normal end
        return "finish", ""
    if isinstance(exc, _Stuck):
        return "wall_clock", ""
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return "output_limit", ""
    return "exception", _describe(exc)


@cocotb.test()
async def chorus_stimulus(dut):
    _write(None)
    Clock(dut.clk, 2 * _CFG["half_ns"], unit="ns").start(start_high=False)
    if _CFG["reset"]:
        rst, active = getattr(dut, _CFG["reset"]), _CFG["reset_active"]
        rst.value = active
        for _ in range(_CFG["reset_cycles"]):
            await FallingEdge(dut.clk)
        rst.value = 1 - active
    else:
        await FallingEdge(dut.clk)
    random.seed(_CFG["seed"])  # cocotb reseeds per test; stimulus draws as the vectors format does
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, _CFG["wall_s"])
    try:
        funcs = _load()
    except (Exception, _Stuck) as exc:
        end, error = _outcome(exc)
        error += " (while loading the module)" if error else ""
    else:
        # If a task the stimulus started raises, cocotb ends this test at once: say so in advance.
        _write("exception", "")
        stim = cocotb.start_soon(_run(dut, funcs))
        watch = cocotb.start_soon(_watch(_CFG["max_time_ns"]))
        await First(stim.complete, watch.complete)
        if stim.done():
            watch.cancel()
            end, error = _outcome(stim.result())
        else:
            stim.cancel()
            end, error = watch.result(), ""
    signal.setitimer(signal.ITIMER_REAL, 0)
    _write(end, error)
