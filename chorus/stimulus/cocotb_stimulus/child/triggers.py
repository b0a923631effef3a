"""The triggers a stimulus task awaits; the scheduler turns the GPI ones into specs for the harness."""
import runtime
from simtime import get_sim_steps


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
        return ("timer", runtime.S.now + self.steps)


class ReadOnly(_GPITrigger):
    key = staticmethod(lambda: ("ro",))


class ReadWrite(_GPITrigger):
    key = staticmethod(lambda: ("rw",))


class NextTimeStep(_GPITrigger):
    key = staticmethod(lambda: ("next",))


class _Signal:
    """A signal of dut (dut._Handle derives from this): what the edge triggers wait on."""


class ValueChange(_GPITrigger):
    kind = "edge"

    def __init__(self, signal):
        if not isinstance(signal, _Signal):
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


class _Done(Trigger):  # what awaiting a Task yields
    def __init__(self, task):
        self.task = task
