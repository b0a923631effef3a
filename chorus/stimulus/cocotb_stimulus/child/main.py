"""The stimulus process's entry point: the harness starts `python -I -S -B <this directory>/main.py`.

Every import happens first, then lockdown() (lockdown.py); after it the process cannot read a
file. It says hello, receives the stimulus over the link (link.py), runs the module with
restricted builtins and awaits its stimulus functions in source order on the scheduler.
"""
import ast
import builtins
import math  # noqa: F401  the stimulus imports random and math, from sys.modules: no file is read then
import os
import random
import sys

# -I leaves this directory off sys.path; the modules here import each other by their bare names.
sys.path.append(os.path.dirname(os.path.abspath(__file__)))

import runtime
from api import stand_ins
from dut import Deposit, Immediate, _Dut, _Handle, _Log
from link import _Link
from lockdown import lockdown
from scheduler import _Sched
from simtime import get_sim_steps, get_sim_time, get_time_from_sim_steps
from sync import Event, Queue, QueueEmpty, QueueFull
from tasks import (CancelledError, Combine, First, SimTimeoutError, Task, _EndTest, create_task,
                   current_task, end_test, start, start_soon, test, with_timeout)
from triggers import (ClockCycles, Edge, FallingEdge, NextTimeStep, NullTrigger, ReadOnly, ReadWrite,
                      RisingEdge, Timer, Trigger, ValueChange)
from values import Logic, LogicArray, Range

# Every name in api.API is imported above (some only for this): _modules() takes them from globals().


def _modules(dut) -> dict:
    return stand_ins({**globals(), "log": _Log(), "top": dut, "pass_test": end_test})


def _load(cfg: dict, modules: dict) -> list:
    """The stimulus functions in source order, after running the module with restricted builtins."""
    tree = ast.parse(cfg["text"], "stimulus.py")
    names = []
    for node in tree.body:
        if isinstance(node, ast.AsyncFunctionDef) and (node.name.startswith("stimulus") or node.decorator_list):
            node.decorator_list = []
            names.append(node.name)

    def _import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name in ("random", "math"):
            return sys.modules[name]
        if level or name not in modules:
            raise ImportError(f"import of {name!r} is not allowed")
        return modules[name] if fromlist else modules["cocotb"]

    safe = {n: getattr(builtins, n) for n in cfg["builtins"] if hasattr(builtins, n)}
    ns = {"__name__": "stimulus", "__builtins__": {**safe, "__import__": _import}}
    random.seed(cfg["seed"])  # draws as in the vectors format
    exec(compile(tree, "stimulus.py", "exec"), ns)
    return [ns[n] for n in names]


def _describe(exc: BaseException) -> str:
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "stimulus.py":
            line = tb.tb_lineno
        tb = tb.tb_next
    where = f" at line {line}" if line else ""
    return (f"{type(exc).__name__}{where}: {exc}".splitlines() or [""])[0][:300]


def main() -> None:
    granted = lockdown()
    link = _Link()
    link.send({"op": "hello", "isolation": granted})
    cfg = link.recv()
    S = runtime.S = _Sched(cfg, link)
    sys.stdout = sys.stderr = link
    dut = _Dut({name: _Handle(name, w, bool(d)) for name, (w, d) in cfg["sigs"].items()})
    loading = True
    try:
        funcs = _load(cfg, _modules(dut))
        loading = False

        async def stimulus_main():
            for func in funcs:
                await func(dut)

        S.run(start_soon(stimulus_main()))
        S.send({"op": "done"})
    except _EndTest:
        S.send({"op": "done"})
    except BaseException as exc:
        S.send({"op": "error", "error": _describe(exc), "loading": loading})
    os._exit(0)  # no clean-up: nothing of the stimulus may run after its end


if __name__ == "__main__":
    main()
