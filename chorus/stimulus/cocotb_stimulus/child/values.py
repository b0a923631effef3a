"""cocotb.types for the stimulus: Range, Logic and LogicArray, as cocotb 2 answers."""


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
