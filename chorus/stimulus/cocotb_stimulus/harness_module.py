"""chorus cocotb harness: clock, reset, then the stimulus, served from its own locked-down process.

This file runs inside the simulator as the only cocotb test module (run.py copies it into each
run directory); chorus itself never imports it. The stimulus never runs in this process: the
child package (child/, copied next to this file as chorus_child/) runs it in a process that can
write no file, open no socket and signal nobody, and sends its writes and awaits here over a
pipe (the protocol is in child/link.py). This side applies writes only to the stimulus's own
inputs and awaits real triggers, so nothing the stimulus does can reach the coverage counters
or the files this process writes.
"""
import importlib.util, json, os, select, signal, subprocess, sys, time
import cocotb
import cocotb.simtime
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import (ClockCycles, Event, FallingEdge, First, NextTimeStep, ReadOnly, ReadWrite, RisingEdge,
                             Timer, ValueChange)

_CFG = json.loads(os.environ.pop("CHORUS_COCOTB"))
_STATUS = os.environ.pop("CHORUS_STATUS_OUT")
CHILD_DIR, CHILD_MAIN = "chorus_child", "main.py"  # run.py copies the child package (child/) next to this file
MAX_LINE, MAX_EDGES = 1 << 20, 1 << 40
_EDGE = {"rise": RisingEdge, "fall": FallingEdge, "edge": ValueChange}
_FIXED = {"ro": ReadOnly, "rw": ReadWrite, "next": NextTimeStep}
# Past the output limit, writes fail with an error (reported as output_limit) instead of a kill;
# a write to a child that died fails with an error instead of SIGPIPE.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
signal.signal(signal.SIGPIPE, signal.SIG_IGN)
_ISOLATION = {}


class _End(Exception):
    """Ends the run: (end, error)."""


def _write(end, error=""):
    with open(_STATUS, "w") as f:
        json.dump({"end": end, "error": error, "time_ns": get_sim_time("ns"), "isolation": _ISOLATION}, f)


def _refuse(why):
    raise _End("exception", f"the stimulus process broke the protocol: {why}"[:300])


class _Signal:
    def __init__(self, handle, name):
        self.h, self.name, self.width = handle, name, len(handle)
        self.drivable = name in ("rst", "rst_n") or name.startswith("in")

    def read(self):
        v = self.h.value
        try:
            return int(v)
        except ValueError:
            return str(v)

    def write(self, value):
        if not self.drivable:
            raise _End("exception", f"the stimulus process asked to drive {self.name}, which it may not; refused")
        if isinstance(value, int) and not isinstance(value, bool):
            self.h.value = value & ((1 << self.width) - 1)
        elif isinstance(value, str) and len(value) == self.width and not set(value.upper()) - set("01XZUWLH-"):
            self.h.value = value
        else:
            _refuse(f"bad value for {self.name}")


def _signals(dut):
    """The aliases are the wrapper's ports: clk, rst or rst_n, in0.., out0.. (nothing deeper is public)."""
    sigs = {}

    def probe(name):
        try:
            sigs[name] = _Signal(getattr(dut, name), name)
        except AttributeError:
            return False
        return True

    for name in ("clk", "rst", "rst_n"):
        probe(name)
    for prefix in ("in", "out"):
        i = 0
        while i < 4096 and probe(f"{prefix}{i}"):
            i += 1
    return sigs


def _child_path():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), CHILD_DIR, CHILD_MAIN)
    if not os.path.exists(path):  # without OS isolation the installed package is readable too
        spec = importlib.util.find_spec("chorus")
        path = os.path.join(*(spec.submodule_search_locations if spec else ["?"])[:1], "stimulus",
                            "cocotb_stimulus", "child", CHILD_MAIN)
    try:
        open(path, "rb").close()
    except OSError as exc:
        raise _End("exception", f"chorus could not start the stimulus process: {CHILD_DIR}/{CHILD_MAIN} is not in "
                                f"the run directory ({exc.strerror}: {path})") from None
    return path


class _Child:
    """The stimulus process. Every read waits at most until the wall-clock deadline: a stimulus
    that loops without awaiting is a child that does not answer."""

    def __init__(self, deadline):
        python = os.environ.get("PYGPI_PYTHON_BIN") or sys.executable
        self.deadline, self.buf = deadline, bytearray()
        self.proc = subprocess.Popen([python, "-I", "-S", "-B", _child_path()], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True, env={})
        self.out, self.inp = self.proc.stdout.fileno(), self.proc.stdin.fileno()
        os.set_blocking(self.inp, False)  # a child that stops reading cannot block us past the deadline

    def send(self, msg):
        data = memoryview((json.dumps(msg) + "\n").encode())
        while data:
            try:
                data = data[os.write(self.inp, data):]
            except BlockingIOError:  # the pipe is full: wait for the child to read, until the deadline
                left = self.deadline - time.monotonic()
                if left <= 0 or not select.select([], [self.inp], [], left)[1]:
                    raise _End("wall_clock", "") from None
            except OSError:
                raise _End("exception", self.died()) from None

    def recv(self):
        if time.monotonic() > self.deadline:  # also when messages keep coming
            raise _End("wall_clock", "")
        while (end := self.buf.find(b"\n")) < 0:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([self.out], [], [], left)[0]:
                raise _End("wall_clock", "")
            chunk = os.read(self.out, 1 << 16)
            if not chunk:
                raise _End("exception", self.died())
            self.buf += chunk
            if len(self.buf) > MAX_LINE:
                _refuse(f"a message longer than {MAX_LINE} bytes")
        line, self.buf = bytes(self.buf[:end]), self.buf[end + 1:]
        try:
            msg = json.loads(line)
        except ValueError:
            msg = None
        if not isinstance(msg, dict):
            _refuse("a message that is not a JSON object")
        return msg

    def died(self):
        try:
            code = self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            code = None
        err = self.proc.stderr.read1(4096).decode("utf-8", "replace").strip().splitlines() if code is not None else []
        why = f"exit code {code}" if code is None or code >= 0 else f"signal {-code}"
        return f"the stimulus process ended without an answer ({why}{': ' + err[-1][:200] if err else ''})"

    def kill(self):
        self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            f.close()


async def _serve(child, sigs):
    """Apply the child's writes, await what it waits for, answer; until it is done."""
    watched = {}
    while True:
        msg = child.recv()
        writes, text = msg.get("writes", []), msg.get("print")
        if not isinstance(writes, list) or len(writes) > len(sigs):
            _refuse("a malformed write list")
        for w in writes:
            if not (isinstance(w, list) and len(w) == 2 and w[0] in sigs):
                _refuse(f"a write to an unknown signal: {str(w)[:40]}")
            sigs[w[0]].write(w[1])
        if isinstance(text, str):
            try:
                sys.stdout.write(text)
                sys.stdout.flush()
            except OSError:  # EFBIG: the run's output limit
                raise _End("output_limit", "") from None
        op = msg.get("op")
        if op == "print":
            continue
        if op == "hello":
            _ISOLATION.update(msg.get("isolation") or {})
            continue
        if op == "done":
            return "finish", ""
        if op == "error":
            loading = " (while loading the module)" if msg.get("loading") else ""
            return "exception", str(msg.get("error"))[:300] + loading
        if op == "read":
            names = msg.get("sigs")
            if not isinstance(names, list) or not all(n in sigs for n in names):
                _refuse("a read of an unknown signal")
            watched.update((n, sigs[n]) for n in names)
            child.send({"values": {n: sigs[n].read() for n in names}})
        elif op == "wait":
            fired = await _wait(msg.get("specs"), sigs)
            child.send({"fired": fired, "t": get_sim_time("step"), "values": {n: s.read() for n, s in watched.items()}})
        else:
            _refuse(f"unknown op {str(op)[:40]!r}")


async def _wait(specs, sigs):
    """Await the first of the child's trigger specs; the indices of every spec that fired."""
    # at most one spec per edge kind of each signal, per fixed phase, and the child's earliest timer
    # (child/scheduler.py keeps the later ones): a longer list is not the child's
    if not isinstance(specs, list) or len(specs) > len(_EDGE) * len(sigs) + len(_FIXED) + 1:
        _refuse(f"a malformed wait (a list of {len(specs) if isinstance(specs, list) else 'no'} trigger specs)")
    now, real, before, timers = get_sim_time("step"), {}, {}, []
    for i, spec in enumerate(specs):
        kind = spec[0] if isinstance(spec, list) and spec else None
        if kind in _EDGE and len(spec) == 3 and spec[1] in sigs and type(spec[2]) is int \
                and 1 <= spec[2] <= (MAX_EDGES if len(specs) == 1 else 1):
            sig = sigs[spec[1]]
            if kind != "edge" and sig.width != 1:
                _refuse(f"an edge of the {sig.width}-bit signal {sig.name}")
            trig = _EDGE[kind](sig.h) if spec[2] == 1 else ClockCycles(sig.h, spec[2], _EDGE[kind])
            if len(specs) > 1:
                before[i] = (kind, sig, sig.read())
        elif kind == "timer" and len(spec) == 2 and type(spec[1]) is int:
            timers.append((spec[1], i))
            continue
        elif kind in _FIXED and len(spec) == 1:
            trig = _FIXED[kind]()
        else:
            _refuse(f"an unknown trigger {str(spec)[:60]}")
        real[i] = trig
    if timers:
        at, i = min(timers)
        if at <= now:  # due in this time step already
            return [j for t, j in timers if t <= now]
        real[i] = Timer(at - now, "step")
    if not real:  # nothing can wake the stimulus: it waits until the run ends
        await Event().wait()
    triggers = list(real.values())
    got = await (First(*triggers) if len(triggers) > 1 else triggers[0])
    first = next(i for i, t in real.items() if t is got)  # cocotb returns the trigger that fired
    now = get_sim_time("step")
    fired = [first] + [j for t, j in timers if t <= now and j != first]
    for j, (kind, sig, old) in before.items():  # other edges of the same moment
        new = sig.read()
        if j != first and new != old and (kind == "edge" or new == (1 if kind == "rise" else 0)):
            fired.append(j)
    return fired


async def _watch(limit_ns, deadline):
    while time.monotonic() < deadline:
        now = get_sim_time("ns")
        if now >= limit_ns - 1e-6:
            return "max_time"
        await Timer(min(_CFG["watch_ns"], limit_ns - now), "ns")
    return "wall_clock"


async def _session(child, sigs):
    try:
        return await _serve(child, sigs)
    except _End as end:
        return end.args
    except Exception as exc:  # e.g. cocotb refusing a value; a stimulus error, never a crash of the run
        return "exception", f"the stimulus process broke the protocol: {type(exc).__name__}: {exc}"[:300]


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
    deadline = time.monotonic() + _CFG["wall_s"]
    sigs, child = _signals(dut), None
    try:
        child = _Child(deadline)
        with open(_CFG["stimulus"]) as f:
            text = f.read()
        child.send({"text": text, "seed": _CFG["seed"], "builtins": _CFG["builtins"], "t": get_sim_time("step"),
                    "precision": cocotb.simtime.time_precision,
                    "sigs": {n: [s.width, s.drivable] for n, s in sigs.items()}})
        serve = cocotb.start_soon(_session(child, sigs))
        watch = cocotb.start_soon(_watch(_CFG["max_time_ns"], deadline))
        await First(serve.complete, watch.complete)
        if serve.done():
            watch.cancel()
            end, error = serve.result()
        else:
            serve.cancel()
            end, error = watch.result(), ""
    except _End as exc:
        end, error = exc.args
    finally:
        if child is not None:
            child.kill()
    print(f"chorus: stimulus process isolation {json.dumps(_ISOLATION)}")
    _write(end, error)
