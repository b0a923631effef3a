"""Stimulus as data: the `vectors` format, and the program every other format is rendered from.

One line is one step: assignments, then an optional repeat `xN` (default 1 cycle).

    in0=5 in1=0x3f      set in0 and in1, then advance one clock cycle
    in2=? x100          a fresh random in2 on each of 100 cycles
    in0=8'hff x4        set, then hold for 4 cycles
    rst x2              hold the design in reset for 2 cycles (either polarity), then release
    . x50               change nothing for 50 cycles ("wait 50" works too)
    # comment

Values: decimal, 0x.., 0b.., Verilog literals (8'hff, 'd12) or `?` for random; values are
masked to the port width. Spaces or commas separate items, `=` or `:` assign, case is
ignored. Inputs change on the falling clock edge, so the design samples them on the next
rising edge.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Iterator

from .aliases import AliasMap

RANDOM = None  # an assignment value meaning "fresh random value each cycle"
MAX_CYCLES = 20000
# Values the expanded stimulus may hold (a record per cycle of a random step, one value per input
# set on it): 20,000 cycles of 12 random inputs. Checked on the parsed program, before anything is
# expanded, so a short text cannot make megabytes (120 lines of `in0=? ... x166` did: 10 MB).
MAX_EXPANDED_VALUES = 250_000


class VectorsError(ValueError):
    """Malformed stimulus; the message names the line and the fix."""


@dataclass(frozen=True)
class Step:
    assigns: tuple[tuple[str, int | None], ...] = ()
    cycles: int = 1
    reset: bool = False


@dataclass
class Program:
    steps: list[Step] = field(default_factory=list)

    @property
    def cycles(self) -> int:
        return sum(s.cycles for s in self.steps)

    @property
    def is_empty(self) -> bool:
        """No input is ever driven and no reset is applied: nothing for the design to respond to."""
        return not any(s.assigns or s.reset for s in self.steps)


_AROUND_ASSIGN = re.compile(r"\s*([=:])\s*")
_ITEM_SPLIT = re.compile(r"[\s,;]+")
# ASCII digits only, and at most 9 of them: `x²` or a 5000-digit count is a malformed line.
_REPEAT = re.compile(r"[x*][0-9]{1,9}")
_COUNT = re.compile(r"[0-9]{1,9}")
_SPACED_ASSIGN = re.compile(r"\s[=:]|[=:]\s")
_VALUE = re.compile(r"^(?:([0-9]+)?'([sS])?([bBoOdDhH]))?([0-9a-fA-FxXzZ_?]{1,1024})$")
_DECIMAL = re.compile(r"[0-9]{1,1024}")


_RANDOM_WORDS = frozenset(("?", "rand", "random", "$urandom", "$random"))
_HEX = re.compile(r"0x[0-9a-f]{1,256}")


def parse_value(text: str) -> int | None:
    t = text.strip().lower().replace("_", "")
    if _DECIMAL.fullmatch(t):
        return int(t)
    if _HEX.fullmatch(t):  # the common case, answered without int()'s error path
        return int(t, 16)
    if t in _RANDOM_WORDS:
        return RANDOM
    try:
        if t.startswith(("0x", "0b", "0o")):
            return int(t, 0)
    except ValueError:
        pass
    m = _VALUE.match(t)
    if m and m.group(3):
        base = {"b": 2, "o": 8, "d": 10, "h": 16}[m.group(3).lower()]
        digits = m.group(4).replace("x", "0").replace("z", "0").replace("?", "0")
        try:
            return int(digits, base)
        except ValueError:
            pass
    raise ValueError(text)


def _alias_names(amap: AliasMap) -> str:
    names = [a.alias for a in amap.drivable.values()]
    return ", ".join(names) if names else "none"


# A line of the common shape (what render_vectors writes): `name=value` items with hex or decimal
# values, one space apart, and an optional repeat. It is read in one pass; any other line goes item
# by item below, which reads these the same way (and names what is wrong with the rest).
_PLAIN_VALUE = r"(?:0x[0-9a-f]{1,256}|[0-9]{1,1024})"
_PLAIN_LINE = re.compile(rf"(?:[a-z_][a-z0-9_]*={_PLAIN_VALUE} )*[a-z_][a-z0-9_]*={_PLAIN_VALUE}(?: x([0-9]{{1,9}}))?")
_PLAIN_ITEM = re.compile(rf"([a-z_][a-z0-9_]*)=({_PLAIN_VALUE})")


def _plain_line(line: str, masks: dict[str, int]) -> tuple[dict, int] | None:
    """(assignments, cycles) of a line of the common shape whose names are all drivable, else None."""
    m = _PLAIN_LINE.fullmatch(line)
    if m is None:
        return None
    pairs = _PLAIN_ITEM.findall(line)
    assigns = {name: (int(value, 16) if value[1:2] == "x" else int(value)) & masks.get(name, 0)
               for name, value in pairs}
    if len(assigns) != len(pairs) or not masks.keys() >= assigns.keys():
        return None  # an input set twice, or an unknown alias (the item-by-item reading names it)
    return assigns, int(m.group(1)) if m.group(1) else 1


def parse_vectors(text: str, amap: AliasMap, max_cycles: int = MAX_CYCLES) -> Program:
    drivable = amap.drivable
    masks = {name: (1 << a.width) - 1 for name, a in drivable.items()}
    steps, total = [], 0
    for n, raw in enumerate((text or "").splitlines(), 1):
        line = raw.split("#", 1)[0].split("//", 1)[0].strip().lower()
        if not line:
            continue
        if (plain := _plain_line(line, masks)) is not None:
            assigns, cycles = plain
            reset = False
            items = ()
        else:
            if _SPACED_ASSIGN.search(line):
                line = _AROUND_ASSIGN.sub(r"\1", line)
            items = [i for i in _ITEM_SPLIT.split(line) if i]
            assigns, cycles, reset = {}, 1, False  # an input set twice on one line keeps its last value
        for item in items:
            # An assignment first (most items are): no other kind of item holds `=` or `:`.
            if "=" in item or ":" in item:
                eq, colon = item.find("="), item.find(":")
                cut = eq if colon < 0 or 0 <= eq < colon else colon
                name, value = item[:cut], item[cut + 1:]
                if name not in drivable:
                    raise VectorsError(f"line {n}: unknown alias {name!r}; this design takes {_alias_names(amap)}")
                try:
                    v = parse_value(value)
                except ValueError:
                    raise VectorsError(f"line {n}: cannot read value {value!r} for {name} "
                                       "(use 12, 0x1f, 0b101, 8'hff or ?)") from None
                assigns.pop(name, None)
                assigns[name] = v if v is RANDOM else v & masks[name]
            elif _REPEAT.fullmatch(item):
                cycles = int(item[1:])
            elif item in (".", "wait", "hold", "nop"):
                continue
            elif _COUNT.fullmatch(item) and items[0] in ("wait", "hold"):
                cycles = int(item)
            elif item in ("rst", "reset", "rst_n"):
                reset = True
            else:
                raise VectorsError(f"line {n}: cannot read {item!r}; write `in0=5 x3`, `rst x2` or `. x10`")
        if cycles < 1:
            raise VectorsError(f"line {n}: a repeat count must be at least 1")
        total += cycles
        if total > max_cycles:
            raise VectorsError(f"line {n}: stimulus exceeds {max_cycles} cycles; shorten the repeats")
        steps.append(Step(tuple(assigns.items()), cycles, reset))
    program = Program(steps)
    if (values := expanded_values(program)) > MAX_EXPANDED_VALUES:
        raise VectorsError(f"the stimulus expands to {values} values, over {MAX_EXPANDED_VALUES}; drive fewer "
                           "random inputs per line or use fewer cycles")
    return program


def expanded_values(program: Program) -> int:
    """How many values `expand` would produce: a step with a random input becomes one record per
    cycle, any other step one record; each record holds its step's inputs and a header."""
    return sum((s.cycles if any(v is RANDOM for _, v in s.assigns) else 1) * (1 + len(s.assigns))
               for s in program.steps)


def render_vectors(program: Program) -> str:
    lines = []
    for s in program.steps:
        parts = ["rst"] if s.reset else []
        parts += [f"{a}={'?' if v is RANDOM else hex(v)}" for a, v in s.assigns]
        parts = parts or ["."]
        lines.append(" ".join(parts) + (f" x{s.cycles}" if s.cycles != 1 else ""))
    return "\n".join(lines) + "\n"


def expand(program: Program, amap: AliasMap, seed: int = 1) -> Iterator[tuple[int, int, list[tuple[int, int]]]]:
    """Concrete records (cycles, reset, [(input index, value)]) with random values drawn, one at a
    time (a caller writes them out without holding them all)."""
    rng = random.Random(seed)
    index = {a.alias: i for i, a in enumerate(amap.inputs)}
    for s in program.steps:
        fixed = [(index[a], v) for a, v in s.assigns if a in index and v is not RANDOM]
        rand = [(index[a], amap.inputs[index[a]].width) for a, v in s.assigns if a in index and v is RANDOM]
        reset = int(s.reset or any(a == amap.reset.alias and v == amap.reset_active
                                   for a, v in s.assigns if amap.reset))
        if rand:
            for _ in range(s.cycles):
                yield 1, reset, fixed + [(i, rng.getrandbits(w)) for i, w in rand]
        else:
            yield s.cycles, reset, fixed


def random_program(amap: AliasMap, cycles: int = 200, seed: int = 0, reset_rate: float = 0.02) -> Program:
    """Uniform random stimulus: every data input random on every cycle, after one reset, with a
    one-cycle reset on about `reset_rate` of the cycles (so sticky state can clear, as a person's
    stimulus would make it)."""
    rng = random.Random(seed)
    steps = [Step((), 2, True)] if amap.reset else []
    for _ in range(cycles):
        if amap.reset and rng.random() < reset_rate:
            steps.append(Step((), 1, True))
        steps.append(Step(tuple((a.alias, rng.getrandbits(a.width)) for a in amap.inputs), 1, False))
    return Program(steps)
