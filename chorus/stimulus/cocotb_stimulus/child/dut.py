"""The dut the stimulus sees: a handle per alias of the wrapper, and cocotb.log."""
import runtime
from simtime import get_sim_time
from triggers import FallingEdge, RisingEdge, ValueChange, _Signal
from values import _CHARS, Logic, LogicArray, Range


class Deposit:
    def __init__(self, value):
        self.value = value


class Immediate(Deposit):
    pass


class _Handle(_Signal):
    def __init__(self, name: str, width: int, drivable: bool):
        self._name, self._width, self._drivable = name, width, drivable

    def get(self):
        v = runtime.S.read(self._name)
        bits = v if isinstance(v, str) else format(v, f"0{self._width}b")
        return Logic(bits) if self._width == 1 else LogicArray(bits, Range(self._width - 1, "downto", 0))

    def set(self, value):
        runtime.S.write(self, _encode(self._name, self._width, value))

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
