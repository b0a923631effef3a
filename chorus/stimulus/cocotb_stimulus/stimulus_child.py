"""The untrusted cocotb stimulus, run in a locked-down process of its own.

The chorus harness (harness_module.py, inside the simulator) starts this file as
`python -I -S -B <this file>` and talks to it over stdin/stdout, one JSON object per line. The
stimulus never runs in the simulator: an escape from the ast check (check.py) or from the
restricted builtins lands here, where the process can write no file, open no socket, start no
process and signal nobody, so it cannot touch the coverage counters or any file of the run.

Before the stimulus text is read, `lockdown()` applies (each as far as the kernel allows; the
harness reports what was granted): no_new_privs; resource limits (no file growth, 1 GiB of
address space, no new descriptors, no processes); Landlock with every filesystem right handled
and none granted, no TCP bind/connect, signals and abstract unix sockets scoped to this
process; an empty capability set; a seccomp filter (x86_64) refusing sockets, new processes,
exec, signals, ptrace, chmod/chown/xattrs and limits or priorities of other processes, which
Landlock does not cover. Everything it needs is imported before, so it never reads a file again.

The stimulus sees stand-ins for the part of cocotb that stimulus uses (handles, triggers,
tasks, Logic/LogicArray; see API): writes are collected and sent with the next wait, awaits
become trigger specs the harness awaits on the real design.

  child -> harness  {"op": "hello", "isolation": {...}}          once, after lockdown
                    {"op": "read", "sigs": [alias], "writes": [[alias, value], ...]}
                    {"op": "wait", "specs": [spec, ...], "writes": [...]}
                    {"op": "done", "writes": [...]}  {"op": "error", "error": "...", "loading": bool}
                    {"op": "print", "print": "..."}  (any message may carry "print": the
                    text the stimulus printed since the last message, for the run log)
  harness -> child  config {"text", "seed", "builtins", "sigs": {alias: [width, drivable]},
                    "precision", "t"}; replies {"values": {alias: int | "01xz.."}} to a read,
                    {"fired": [spec index], "t": steps, "values": {...}} to a wait
  spec: ["rise" | "fall" | "edge", alias, n] (n > 1 only when it is the only spec: n edges),
        ["timer", absolute step], ["ro"], ["rw"], ["next"]
Values of every alias read once come with each wake-up, so reads need no round trip. The
harness trusts none of it: it masks values, drives only in*/rst/rst_n, bounds every message
and ends the run as the stimulus's runtime error on anything malformed.
"""
import ast
import builtins
import ctypes
import json
import math
import os
import random
import resource
import signal
import sys
import types
from collections import deque

PRINT_CHUNK = 1 << 16

# ----------------------------------------------------------------------------- lockdown


def lockdown() -> dict:
    """Drop every right the stimulus could use against the run; returns what the kernel granted."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    got = {"no_new_privs": libc.prctl(38, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                                      ctypes.c_ulong(0)) == 0}
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing
    for res, n in ((resource.RLIMIT_FSIZE, 0), (resource.RLIMIT_AS, 1 << 30), (resource.RLIMIT_CORE, 0)):
        _cap(res, n)
    if os.getuid() != 0:  # root is exempt from RLIMIT_NPROC; seccomp covers it below
        _cap(resource.RLIMIT_NPROC, 0)
    got["landlock_abi"] = _landlock(libc)
    hdr, data = (ctypes.c_uint32 * 2)(0x20080522, 0), (ctypes.c_uint32 * 6)()  # capset v3: no capabilities
    capset = {"x86_64": 126, "aarch64": 91}.get(os.uname().machine)
    got["capabilities_dropped"] = capset is not None and libc.syscall(ctypes.c_long(capset), hdr, data) == 0
    _cap(resource.RLIMIT_NOFILE, 1 + max(fd for fd in range(256) if _is_open(fd)))  # no new socket, pipe, file
    got["seccomp"] = os.uname().machine == "x86_64" and got["no_new_privs"] and _seccomp(libc)
    return got


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _cap(res: int, n: int) -> None:
    hard = resource.getrlimit(res)[1]
    n = n if hard == resource.RLIM_INFINITY else min(n, hard)
    resource.setrlimit(res, (n, n))


def _landlock(libc) -> int:
    """A Landlock domain that handles every right of this kernel's ABI and grants none."""
    abi = libc.syscall(ctypes.c_long(444), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return 0
    fs = (1 << 13) - 1 | (abi >= 2) << 13 | (abi >= 3) << 14 | (abi >= 5) << 15
    attr = (ctypes.c_uint64 * 3)(fs, 3 if abi >= 4 else 0, 3 if abi >= 6 else 0)  # net: bind+connect TCP
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    fd = libc.syscall(ctypes.c_long(444), attr, ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        return 0
    ok = libc.syscall(ctypes.c_long(446), ctypes.c_long(fd), ctypes.c_uint32(0)) == 0
    os.close(fd)
    return abi if ok else 0


# x86_64 system calls the stimulus never needs. Landlock leaves chmod/chown/xattrs/timestamps
# alone, and same-uid calls can reach the simulator (prlimit, nice, affinity, signals).
_DENIED = (
    41, 42, 49, 53,  # socket connect bind socketpair
    56, 57, 58, 59, 322, 435,  # clone fork vfork execve execveat clone3
    62, 200, 234, 129, 297, 424, 434, 438,  # kill tkill tgkill rt_(tg)sigqueueinfo pidfd_send_signal/open/getfd
    101, 310, 311, 440,  # ptrace process_vm_readv/writev process_madvise
    90, 91, 268, 452, 92, 93, 94, 260,  # chmod fchmod fchmodat fchmodat2 chown fchown lchown fchownat
    132, 235, 261, 280,  # utime utimes futimesat utimensat
    188, 189, 190, 197, 198, 199, 463, 466, 469,  # set/remove xattr (+ *at), file_setattr
    141, 142, 144, 203, 251, 314, 160, 302,  # setpriority sched_set* ioprio_set setrlimit prlimit64
    165, 272, 308, 303, 304, 321, 323, 298, 425, 248, 249, 250,  # mount unshare setns handles bpf ... keys
)


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Filter))]


def _seccomp(libc) -> bool:
    deny, n = 0x00050000 | 1, len(_DENIED)  # SECCOMP_RET_ERRNO | EPERM
    code = [(0x20, 0, 0, 4), (0x15, 1, 0, 0xC000003E), (0x06, 0, 0, deny),  # other arch (int 0x80): deny
            (0x20, 0, 0, 0), (0x35, n + 1, 0, 0x40000000)]  # x32 numbers: deny
    code += [(0x15, n - i, 0, nr) for i, nr in enumerate(_DENIED)]
    code += [(0x06, 0, 0, 0x7FFF0000), (0x06, 0, 0, deny)]
    filters = (_Filter * len(code))(*code)
    prog = _Prog(len(code), filters)
    return libc.prctl(22, ctypes.c_ulong(2), ctypes.byref(prog), ctypes.c_ulong(0), ctypes.c_ulong(0)) == 0


# ----------------------------------------------------------------------------- link to the harness

class _Link:
    def __init__(self):
        self.inp = open(0, "rb", closefd=False)
        self.text: list[str] = []
        self.size = 0

    def send(self, msg: dict) -> None:
        if self.text:
            msg["print"] = "".join(self.text)
            self.text, self.size = [], 0
        data = (json.dumps(msg) + "\n").encode()
        while data:
            data = data[os.write(1, data):]

    def recv(self) -> dict:
        line = self.inp.readline()
        if not line:
            os._exit(0)  # the harness is gone
        return json.loads(line)

    def write(self, s) -> int:  # sys.stdout and sys.stderr: print() output goes to the run log
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        self.text.append(s)
        self.size += len(s)
        if self.size >= PRINT_CHUNK:
            self.send({"op": "print"})
        return len(s)

    def flush(self) -> None:
        pass


LINK: _Link = None  # set by main()


# ----------------------------------------------------------------------------- values

class Range:
    def __init__(self, left: int, direction, right: int | None = None):
        if right is None:
            direction, right = ("to" if left <= direction else "downto"), direction
        if direction not in ("to", "downto"):
            raise ValueError(f"direction must be 'to' or 'downto', not {direction!r}")
        self.left, self.direction, self.right = int(left), direction, int(right)

    def __len__(self):
        return max(0, (self.right - self.left if self.direction == "to" else self.left - self.right) + 1)

    def __iter__(self):
        step = 1 if self.direction == "to" else -1
        return iter(range(self.left, self.right + step, step))

    def index(self, i: int) -> int:
        pos = i - self.left if self.direction == "to" else self.left - i
        if not 0 <= pos < len(self):
            raise IndexError(f"index {i} out of range")
        return pos

    def __eq__(self, other):
        return isinstance(other, Range) and (self.left, self.direction, self.right) == \
            (other.left, other.direction, other.right)

    def __repr__(self):
        return f"Range({self.left}, {self.direction!r}, {self.right})"


_CHARS = "01XZUWLH-"


class Logic:
    __slots__ = ("_c",)

    def __init__(self, value="X"):
        if isinstance(value, Logic):
            value = value._c
        elif not isinstance(value, (int, str)):
            raise TypeError(f"Expected str, bool, or int, not {type(value).__qualname__}")
        elif isinstance(value, int):
            value = "01"[value] if value in (0, 1) else value
        if not (isinstance(value, str) and len(value) == 1 and value.upper() in _CHARS):
            raise ValueError(f"{value!r} is not convertible to Logic")
        self._c = value.upper()

    def __int__(self):
        if self._c in "0L":
            return 0
        if self._c in "1H":
            return 1
        raise ValueError(f"Cannot convert {self!r} to int")

    __index__ = __int__

    def __bool__(self):
        return bool(int(self))

    def __eq__(self, other):
        try:
            return isinstance(other, (Logic, int, str)) and self._c == Logic(other)._c
        except ValueError:
            return False

    def __hash__(self):
        return hash(self._c)

    def __and__(self, other):
        a, b = self._c, Logic(other)._c
        return Logic("0" if "0" in (a, b) else "1" if a == b == "1" else "X")

    def __or__(self, other):
        a, b = self._c, Logic(other)._c
        return Logic("1" if "1" in (a, b) else "0" if a == b == "0" else "X")

    def __xor__(self, other):
        a, b = self._c, Logic(other)._c
        return Logic(str(int(a) ^ int(b)) if a in "01" and b in "01" else "X")

    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__

    def __invert__(self):
        return Logic({"0": "1", "1": "0"}.get(self._c, "X"))

    def __len__(self):
        return 1

    @property
    def is_resolvable(self):
        return self._c in "01LH"

    def __str__(self):
        return self._c

    def __repr__(self):
        return f"Logic({self._c!r})"


class LogicArray:
    """A bit vector as cocotb 2 returns it: str() is the bits left to right, int() unsigned."""

    def __init__(self, value, range=None):
        if isinstance(range, int):
            range = Range(range - 1, "downto", 0)
        if isinstance(value, int) and not isinstance(value, bool):
            if range is None or value < 0 or value >> len(range):
                raise ValueError(f"{value} does not fit an unsigned vector of {len(range or ())} bits")
            bits = format(value, f"0{len(range)}b") if len(range) else ""
        else:
            bits = "".join(str(Logic(v)) for v in (value.replace("_", "") if isinstance(value, str) else value))
        self._range = range or Range(len(bits) - 1, "downto", 0)
        if len(bits) != len(self._range):
            raise ValueError(f"value of length {len(bits)} does not fit range {self._range!r}")
        self._bits = bits

    @classmethod
    def from_unsigned(cls, value: int, range):
        return cls(value, range)

    @classmethod
    def from_signed(cls, value: int, range):
        n = range if isinstance(range, int) else len(range)
        if not -(1 << (n - 1)) <= value < 1 << (n - 1):
            raise OverflowError(f"{value} does not fit a signed vector of {n} bits")
        return cls(value & ((1 << n) - 1), range)

    range = property(lambda self: self._range)
    left = property(lambda self: self._range.left)
    right = property(lambda self: self._range.right)
    direction = property(lambda self: self._range.direction)
    is_resolvable = property(lambda self: all(c in "01LH" for c in self._bits))
    integer = property(lambda self: self.to_unsigned())
    signed_integer = property(lambda self: self.to_signed())
    binstr = property(lambda self: self._bits)

    def to_unsigned(self) -> int:
        if not self._bits:
            raise ValueError("Cannot convert null vector to integer")
        if not self.is_resolvable:
            raise ValueError(f"{self!r} contains non-0/1 values")
        return int(self._bits.replace("L", "0").replace("H", "1"), 2)

    def to_signed(self) -> int:
        v, n = self.to_unsigned(), len(self._bits)
        return v - (1 << n) if v >> (n - 1) else v

    def __int__(self):
        return self.to_unsigned()

    __index__ = __int__

    def __bool__(self):
        return bool(self._bits) and bool(int(self))

    def __len__(self):
        return len(self._bits)

    def __iter__(self):
        return (Logic(c) for c in self._bits)

    def __reversed__(self):
        return (Logic(c) for c in reversed(self._bits))

    def __eq__(self, other):
        if isinstance(other, int):
            try:
                return bool(self._bits) and (self.to_signed() if other < 0 else self.to_unsigned()) == other
            except ValueError:
                return False
        if isinstance(other, str):
            return self._bits == other.upper()
        if isinstance(other, LogicArray):
            return self._bits == other._bits
        if isinstance(other, (list, tuple)):
            try:
                return self._bits == LogicArray(other)._bits
            except ValueError:
                return False
        return NotImplemented

    __hash__ = None

    def __getitem__(self, item):
        if isinstance(item, int):
            return Logic(self._bits[self._range.index(item)])
        if isinstance(item, slice):
            start = self.left if item.start is None else item.start
            stop = self.right if item.stop is None else item.stop
            a, b = self._range.index(start), self._range.index(stop)
            if item.step is not None or a > b:
                raise IndexError(f"slice [{start}:{stop}] does not match the range of {self!r}")
            return LogicArray(self._bits[a:b + 1], Range(start, self.direction, stop))
        raise TypeError(f"indexes must be ints or slices, not {type(item).__name__}")

    def __setitem__(self, item, value):
        if not isinstance(item, int):
            raise TypeError("only single bits can be assigned")
        i = self._range.index(item)
        self._bits = self._bits[:i] + str(Logic(value)) + self._bits[i + 1:]

    def _bitwise(self, other, op):
        if not isinstance(other, LogicArray):
            return NotImplemented
        if len(other) != len(self):
            raise ValueError(f"cannot combine vectors of length {len(self)} and {len(other)}")
        return LogicArray("".join(str(op(a, b)) for a, b in zip(self, other)), self._range)

    __and__ = lambda self, other: self._bitwise(other, Logic.__and__)  # noqa: E731
    __or__ = lambda self, other: self._bitwise(other, Logic.__or__)  # noqa: E731
    __xor__ = lambda self, other: self._bitwise(other, Logic.__xor__)  # noqa: E731

    def __invert__(self):
        return LogicArray("".join(str(~b) for b in self), self._range)

    def __format__(self, spec):
        return format(self._bits if not spec else int(self), spec)

    def __str__(self):
        return self._bits

    def __repr__(self):
        return f"LogicArray({self._bits!r}, {self._range!r})"


# ----------------------------------------------------------------------------- tasks and triggers

class CancelledError(BaseException):
    """Thrown into a cancelled task; like asyncio's, `except Exception` does not catch it."""


class _EndTest(BaseException):
    pass


class SimTimeoutError(TimeoutError):
    pass


class Trigger:
    def __await__(self):
        return (yield self)


class _GPITrigger(Trigger):
    """A trigger the harness awaits on the real design; key() names it at the time it is awaited."""


class Timer(_GPITrigger):
    def __init__(self, time, unit="step", *, round_mode=None, units=None):
        if time <= 0:
            raise ValueError("Timer argument time must be positive")
        self.steps = max(1, get_sim_steps(time, units or unit, round_mode=round_mode or "error"))

    def key(self):
        return ("timer", S.now + self.steps)


class ReadOnly(_GPITrigger):
    key = staticmethod(lambda: ("ro",))


class ReadWrite(_GPITrigger):
    key = staticmethod(lambda: ("rw",))


class NextTimeStep(_GPITrigger):
    key = staticmethod(lambda: ("next",))


class ValueChange(_GPITrigger):
    kind = "edge"

    def __init__(self, signal):
        if not isinstance(signal, _Handle):
            raise TypeError(f"{type(self).__name__} needs a signal of dut, not {signal!r}")
        if self.kind != "edge" and signal._width != 1:
            raise TypeError(f"{type(self).__name__} needs a 1-bit signal; {signal._name} has {signal._width} bits")
        self.signal = signal

    def key(self):
        return (self.kind, self.signal._name)


class RisingEdge(ValueChange):
    kind = "rise"


class FallingEdge(ValueChange):
    kind = "fall"


Edge = ValueChange


class ClockCycles(Trigger):
    def __init__(self, signal, num_cycles, edge_type=None, *, rising=None):
        if edge_type is not None and rising is not None:
            raise TypeError("Passed more than one edge selection argument.")
        if isinstance(edge_type, bool) or edge_type is None:
            up = edge_type if edge_type is not None else rising is not False
            edge_type = RisingEdge if up else FallingEdge
        self.signal, self.num_cycles, self.edge_type = signal, num_cycles, edge_type
        self.edge = edge_type(signal)


class NullTrigger(Trigger):
    def __init__(self, name=None):
        self.name = name


class _Done(Trigger):
    def __init__(self, task):
        self.task = task


class _EventWait(Trigger):
    def __init__(self, event):
        self.event = event


class Event:
    def __init__(self, name=None):
        self.name, self.data, self._set, self._waiters = name, None, False, []

    def set(self, data=None):
        self._set, self.data = True, data
        waiters, self._waiters = self._waiters, []
        for task, trig in waiters:
            S.wake(task, trig)

    def clear(self):
        self._set = False

    def is_set(self):
        return self._set

    def wait(self):
        return _EventWait(self)


class Task:
    def __init__(self, coro, name=None):
        if not hasattr(coro, "send"):
            if not hasattr(coro, "__await__"):
                raise TypeError(f"a Task needs a coroutine, not {coro!r}")
            coro = _awaiting(coro)
        self._coro, self._name = coro, name or f"Task {id(self):x}"
        self._done = self._scheduled = self._cancelled = False
        self._result = self._exc = self._waiting = self._cancel_exc = None
        self._watchers = []

    def _start(self):
        if not self._scheduled:
            self._scheduled = True
            S.ready.append((self, None, None))

    def _step(self, value, exc):
        if self._done:
            return
        self._waiting = None
        if self._cancel_exc is not None:
            exc, self._cancel_exc = self._cancel_exc, None
        S.current = self
        try:
            trig = self._coro.throw(exc) if exc is not None else self._coro.send(value)
        except StopIteration as stop:
            self._finish(result=stop.value)
        except CancelledError:
            self._finish(cancelled=True)
        except _EndTest:
            raise
        except BaseException as e:  # the stimulus's own error, reported with its line
            self._finish(exc=e)
        else:
            S.wait(self, trig)
        finally:
            S.current = None

    def _finish(self, result=None, exc=None, cancelled=False):
        self._done, self._result, self._exc, self._cancelled = True, result, exc, cancelled
        watchers, self._watchers = self._watchers, []
        for task, trig in watchers:
            S.wake(task, trig)
        if exc is not None and not watchers and S.failure is None:
            S.failure = exc  # as in cocotb: an error nobody awaits ends the test

    def done(self):
        return self._done

    def cancelled(self):
        return self._cancelled

    def result(self):
        if not self._done:
            raise RuntimeError("the task has not finished")
        if self._cancelled:
            raise CancelledError()
        if self._exc is not None:
            raise self._exc
        return self._result

    def exception(self):
        if self._cancelled:
            raise CancelledError()
        return self._exc

    def cancel(self, msg=None):
        if self._done:
            return False
        self._cancel_exc = CancelledError(*((msg,) if msg else ()))
        if self._waiting is not None:
            S.unwait(self)
            S.ready.append((self, None, None))
        self._start()
        return True

    kill = cancel

    @property
    def complete(self):
        return _Done(self)

    def join(self):
        return _Done(self)

    def get_name(self):
        return self._name

    def set_name(self, name):
        self._name = str(name)

    def __await__(self):
        self._start()
        yield _Done(self)
        return self.result()

    def __repr__(self):
        return f"<{self._name}>"


async def _awaiting(awaitable):
    return await awaitable


class First:
    def __init__(self, *triggers):
        if not triggers:
            raise ValueError("First() requires at least one trigger")
        self.triggers = triggers

    def __await__(self):
        return self._wait().__await__()

    async def _wait(self):
        won, done = [], Event()

        async def one(t):
            try:
                got = (True, await t)
            except CancelledError:
                raise
            except BaseException as e:
                got = (False, e)
            if not won:
                won.append(got)
                done.set()

        tasks = [start_soon(one(t)) for t in self.triggers]
        try:
            await done.wait()
        finally:
            for t in tasks:
                t.cancel()
        ok, value = won[0]
        if not ok:
            raise value
        return value


class Combine(First):
    async def _wait(self):
        for task in [start_soon(_awaiting(t)) for t in self.triggers]:
            await task
        return self


async def with_timeout(trigger, timeout_time, timeout_unit="step", round_mode=None):
    if hasattr(trigger, "send"):
        trigger = start_soon(trigger)
    timer = Timer(timeout_time, timeout_unit, round_mode=round_mode)
    value = await First(trigger, timer)
    if value is timer:
        if isinstance(trigger, Task):
            trigger.cancel()
        raise SimTimeoutError()
    return value


def start_soon(coro, *, name=None):
    task = coro if isinstance(coro, Task) else Task(coro, name)
    task._start()
    return task


async def start(coro, *, name=None):
    task = start_soon(coro, name=name)
    await NullTrigger()
    return task


def create_task(coro, *, name=None):
    return coro if isinstance(coro, Task) else Task(coro, name)


def current_task():
    return S.current


def end_test(msg=None):
    raise _EndTest(msg)


def test(*args, **kwargs):  # @cocotb.test() and @cocotb.test: the function itself
    return args[0] if len(args) == 1 and callable(args[0]) and not kwargs else (lambda f: f)


class QueueFull(Exception):
    pass


class QueueEmpty(Exception):
    pass


class Queue:
    def __init__(self, maxsize=0):
        self.maxsize, self._items, self._changed = maxsize, deque(), Event()

    def qsize(self):
        return len(self._items)

    def empty(self):
        return not self._items

    def full(self):
        return 0 < self.maxsize <= len(self._items)

    def _notify(self):
        event, self._changed = self._changed, Event()
        event.set()

    def put_nowait(self, item):
        if self.full():
            raise QueueFull()
        self._items.append(item)
        self._notify()

    def get_nowait(self):
        if not self._items:
            raise QueueEmpty()
        item = self._items.popleft()
        self._notify()
        return item

    async def put(self, item):
        while self.full():
            await self._changed.wait()
        self.put_nowait(item)

    async def get(self):
        while self.empty():
            await self._changed.wait()
        return self.get_nowait()


_SCALE = {"fs": -15, "ps": -12, "ns": -9, "us": -6, "ms": -3, "sec": 0}


def _scale(unit):
    if unit not in _SCALE:
        raise ValueError(f"Invalid unit ({unit}) provided")
    return _SCALE[unit]


def _ldexp10(x, exp):  # cocotb's arithmetic, so rounding errors match
    return x * 10 ** exp if exp > 0 else x / 10 ** -exp


def get_sim_steps(time, unit="step", *, round_mode="error", units=None):
    unit = units or unit
    result = time if unit == "step" else _ldexp10(time, _scale(unit) - S.precision)
    if round_mode == "error":
        steps = math.floor(result)
        if steps != result:
            raise ValueError(f"Unable to accurately represent {time}({unit}) with the simulator precision of "
                             f"1e{S.precision}")
    elif round_mode in ("ceil", "floor", "round"):
        steps = {"ceil": math.ceil, "floor": math.floor, "round": round}[round_mode](result)
    else:
        raise ValueError(f"Invalid round_mode specifier: {round_mode}")
    return int(steps)


def get_time_from_sim_steps(steps, unit="step", *, units=None):
    unit = units or unit
    return steps if unit == "step" else _ldexp10(steps, S.precision - _scale(unit))


def get_sim_time(unit="step", *, units=None):
    return get_time_from_sim_steps(S.now, units or unit)


# ----------------------------------------------------------------------------- the scheduler

_EDGES = ("rise", "fall", "edge")


class _Sched:
    """Runs the stimulus tasks; asks the harness to apply writes and wait whenever all are blocked."""

    def __init__(self, cfg: dict):
        self.now, self.precision = cfg["t"], cfg["precision"]
        self.ready = deque()  # (task, value to send, exception to throw)
        self.gpi: dict[tuple, list] = {}  # spec key -> [[task, edges still to see, trigger], ...]
        self.values: dict = {}  # alias -> latest known value (int, or str with x/z)
        self.writes: dict = {}  # alias -> value written since the last message (the last write wins)
        self.read_only = False
        self.current = self.failure = None

    def wake(self, task, trig, exc=None):
        task._waiting = None
        self.ready.append((task, trig, exc))

    def wait(self, task, trig):
        if task._cancel_exc is not None or isinstance(trig, NullTrigger):
            return self.wake(task, trig)
        leaf, count = (trig.edge, trig.num_cycles) if isinstance(trig, ClockCycles) else (trig, 1)
        if isinstance(leaf, _GPITrigger):
            if count <= 0:
                return self.wake(task, trig)
            key = leaf.key()
            self.gpi.setdefault(key, []).append([task, count, trig])
            task._waiting = key
        elif isinstance(trig, (_Done, _EventWait)):
            done = trig.task._done if isinstance(trig, _Done) else trig.event._set
            if done:
                return self.wake(task, trig)
            (trig.task._watchers if isinstance(trig, _Done) else trig.event._waiters).append((task, trig))
            task._waiting = trig
        else:
            self.wake(task, None, TypeError(f"cannot await {trig!r} (not a cocotb trigger)"))

    def unwait(self, task):
        w, task._waiting = task._waiting, None
        if isinstance(w, tuple):
            left = [e for e in self.gpi.get(w, []) if e[0] is not task]
            self.gpi[w] = left
            if not left:
                del self.gpi[w]
        elif w is not None:
            lst = w.task._watchers if isinstance(w, _Done) else w.event._waiters
            lst[:] = [e for e in lst if e[0] is not task]

    def write(self, handle, value):
        if not handle._drivable:
            raise TypeError(_drive_error(handle._name))
        if self.read_only:
            raise RuntimeError("Attempting settings a value during the ReadOnly phase.")
        self.writes[handle._name] = value  # not read back before the harness applies it, as in cocotb

    def read(self, name):
        if name not in self.values:  # first read: from then on the harness sends it with every wake-up
            self.values.update(self.request({"op": "read", "sigs": [name]})["values"])
        return self.values[name]

    def request(self, msg: dict) -> dict:
        self.send(msg)
        return LINK.recv()

    def send(self, msg: dict):
        msg["writes"], self.writes = [[k, v] for k, v in self.writes.items()], {}
        LINK.send(msg)

    def run(self, main):
        """Until `main` ends, or a task that nobody awaits raises, or end_test()."""
        while True:
            while self.ready and self.failure is None:
                task, value, exc = self.ready.popleft()
                task._step(value, exc)
            if self.failure is not None:
                raise self.failure
            if main.done():
                return main.result()
            self.sleep()

    def sleep(self):
        keys = list(self.gpi)
        # One pending edge (the usual `await ClockCycles(dut.clk, n)`): the harness counts them all.
        n = min(e[1] for e in self.gpi[keys[0]]) if len(keys) == 1 and keys[0][0] in _EDGES else 1
        specs = [[*k, n] if k[0] in _EDGES else list(k) for k in keys]
        reply = self.request({"op": "wait", "specs": specs})
        self.now, self.read_only = reply["t"], False
        self.values.update(reply["values"])
        for i in reply["fired"]:
            key = keys[i]
            self.read_only |= key == ("ro",)
            left = []
            for entry in self.gpi.pop(key):
                entry[1] -= n
                (left.append(entry) if entry[1] > 0 else self.wake(entry[0], entry[2]))
            if left:
                self.gpi[key] = left


def _drive_error(name):
    if name == "clk":
        return "clk is driven by chorus; the stimulus only awaits its edges"
    return f"{name} is not drivable: stimulus drives only in*, rst and rst_n"


S: _Sched = None  # set by main()


# ----------------------------------------------------------------------------- dut and handles

class Deposit:
    def __init__(self, value):
        self.value = value


class Immediate(Deposit):
    pass


class _Handle:
    def __init__(self, name: str, width: int, drivable: bool):
        self._name, self._width, self._drivable = name, width, drivable

    def get(self):
        v = S.read(self._name)
        bits = v if isinstance(v, str) else format(v, f"0{self._width}b")
        return Logic(bits) if self._width == 1 else LogicArray(bits, Range(self._width - 1, "downto", 0))

    def set(self, value):
        S.write(self, _encode(self._name, self._width, value))

    value = property(get, set)
    setimmediatevalue = set
    rising_edge = property(lambda self: RisingEdge(self))
    falling_edge = property(lambda self: FallingEdge(self))
    value_change = property(lambda self: ValueChange(self))

    def __len__(self):
        return self._width

    def __repr__(self):
        return f"{'LogicObject' if self._width == 1 else 'LogicArrayObject'}(chorus_cocotb_top.{self._name})"


def _encode(name: str, width: int, value):
    """What cocotb accepts for a write to a logic port of `width` bits, as an int or a 01xz string."""
    if isinstance(value, Deposit):
        value = value.value
    if width == 1 and isinstance(value, (int, str, Logic)):
        bits = str(Logic(value))
    elif isinstance(value, int):
        if not -(1 << (width - 1)) <= value < 1 << width:
            raise ValueError(f"Int value ({value!r}) out of range for assignment of {width!r}-bit signal ({name!r})")
        return value & ((1 << width) - 1)
    elif isinstance(value, str):
        bits = value.replace("_", "").upper()
        bad = set(bits) - set(_CHARS)
        if bad:
            raise ValueError(f"String literal contains invalid logic values: {', '.join(map(repr, sorted(bad)))}")
    elif isinstance(value, (LogicArray, Logic)):
        bits = str(value)
    else:
        raise TypeError(f"Unsupported type for value assignment: {type(value)} ({value!r})")
    if len(bits) != width:
        raise ValueError(f"Cannot assign value of length {len(bits)} to handle of length {width}")
    return int(bits, 2) if set(bits) <= {"0", "1"} else bits


class _Dut:
    def __init__(self, sigs: dict):
        object.__setattr__(self, "_sigs", sigs)

    def __getattr__(self, name):
        try:
            return self._sigs[name]
        except KeyError:
            raise AttributeError(f"chorus_cocotb_top contains no child object named {name}") from None

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot assign dut.{name}; assign dut.{name}.value")

    def __repr__(self):
        return "HierarchyObject(chorus_cocotb_top)"


class _Log:
    def _emit(self, level, msg, *args):
        print(f"{get_sim_time('ns'):.2f}ns {level:<8} stimulus {msg % args if args else msg}")

    def debug(self, msg, *args):
        pass

    info = lambda self, msg, *a: self._emit("INFO", msg, *a)  # noqa: E731
    warning = warn = lambda self, msg, *a: self._emit("WARNING", msg, *a)  # noqa: E731
    error = exception = lambda self, msg, *a: self._emit("ERROR", msg, *a)  # noqa: E731
    critical = lambda self, msg, *a: self._emit("CRITICAL", msg, *a)  # noqa: E731

    def setLevel(self, level):
        pass


# ----------------------------------------------------------------------------- the cocotb stand-in

# What stimulus may import from each module (check.py answers other names before any run).
API = {
    "cocotb": ("start_soon", "start", "create_task", "end_test", "pass_test", "test", "log", "top"),
    "cocotb.triggers": ("Timer", "RisingEdge", "FallingEdge", "Edge", "ValueChange", "ClockCycles", "ReadOnly",
                        "ReadWrite", "NextTimeStep", "First", "Combine", "Event", "NullTrigger", "Trigger",
                        "SimTimeoutError", "with_timeout"),
    "cocotb.task": ("Task", "CancelledError", "current_task"),
    "cocotb.types": ("Logic", "LogicArray", "Range"),
    "cocotb.handle": ("Deposit", "Immediate"),
    "cocotb.queue": ("Queue", "QueueFull", "QueueEmpty"),
    "cocotb.utils": ("get_sim_time", "get_sim_steps", "get_time_from_sim_steps"),
    "cocotb.simtime": ("get_sim_time",),
    "cocotb.result": ("SimTimeoutError",),
    "cocotb.clock": (),
}


def _modules(dut) -> dict:
    extra = {"log": _Log(), "top": dut, "pass_test": end_test}
    mods = {}
    for name, names in API.items():
        mod = types.ModuleType(name)
        for n in names:
            setattr(mod, n, extra[n] if n in extra else globals()[n])
        mods[name] = mod
    for name, mod in mods.items():
        if name != "cocotb":
            setattr(mods["cocotb"], name.split(".")[1], mod)
    return mods


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
    global LINK, S
    granted = lockdown()
    LINK = _Link()
    LINK.send({"op": "hello", "isolation": granted})
    cfg = LINK.recv()
    S = _Sched(cfg)
    sys.stdout = sys.stderr = LINK
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
