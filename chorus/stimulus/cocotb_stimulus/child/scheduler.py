"""The scheduler: runs the stimulus tasks and talks to the harness whenever all of them are blocked."""
from collections import deque

from sync import _EventWait
from triggers import ClockCycles, NullTrigger, _Done, _GPITrigger

_EDGES = ("rise", "fall", "edge")


class _Sched:
    """Runs the stimulus tasks; asks the harness to apply writes and wait whenever all are blocked."""

    def __init__(self, cfg: dict, link):
        self.link = link  # link._Link
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
        return self.link.recv()

    def send(self, msg: dict):
        msg["writes"], self.writes = [[k, v] for k, v in self.writes.items()], {}
        self.link.send(msg)

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
        # Timers end in time order, so the harness is sent only the earliest: any number of tasks may
        # wait on timers at once, and a wait holds at most one spec per signal edge and phase besides.
        timers = sorted(k for k in self.gpi if k[0] == "timer")
        keys = [k for k in self.gpi if k[0] != "timer"] + timers[:1]
        # One pending edge (the usual `await ClockCycles(dut.clk, n)`): the harness counts them all.
        n = min(e[1] for e in self.gpi[keys[0]]) if len(keys) == 1 and keys[0][0] in _EDGES else 1
        specs = [[*k, n] if k[0] in _EDGES else list(k) for k in keys]
        reply = self.request({"op": "wait", "specs": specs})
        self.now, self.read_only = reply["t"], False
        self.values.update(reply["values"])
        fired = []
        for i in reply["fired"]:
            fired.append(keys[i])
            if timers and keys[i] == timers[0]:  # the timers due with it, in time order
                fired += [k for k in timers[1:] if k[1] <= self.now]
        for key in fired:
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
