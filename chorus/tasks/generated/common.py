"""Shared pieces of the generated families: ports, the RTL header, the spec text, a stimulus
builder that writes `vectors` text on the canonical aliases, and the Task assembly.

Every design has `clk` and an asynchronous active-low `rst_n`, so its aliases are `clk`,
`rst_n`, then `in0, in1, ...` for the other inputs in declaration order and `out0, ...` for
the outputs. The stimulus builder relies on that order, which `Design.ports` fixes.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from ...core.task import Task

DIFFICULTIES = ("easy", "medium", "hard")
# The staged world's held-out and training mixture (issue 27): design k is DIFFICULTIES[k % 3], built
# with its family's alternative strategies (a family's STRATEGIES) where it has them. Its own design
# stream: the designs of the three plain difficulties stay what they were.
MIXED = "mixed"


def kept_secret(rng, difficulty: str, staged: bool) -> bool:
    """Whether a staged design keeps its code, key or pattern out of its spec and brief (so only a
    sweep can find it): easy and medium designs, one in two; hard ones and plain designs never. It
    draws from rng only for staged easy and medium designs, so no other design's stream moves."""
    return staged and difficulty != "hard" and rng.random() < 0.5
CLK = "clk"
RST = "rst_n"
# The `compact` program's cycle budget: that of uniform random stimulus (policy=random's default
# cycles), so a compact program that beats random does so by what it targets, not by running longer.
COMPACT_CYCLES = 500


@dataclass(frozen=True)
class Port:
    name: str
    direction: str  # input | output
    width: int
    desc: str


def inp(name: str, width: int, desc: str) -> Port:
    return Port(name, "input", width, desc)


def out(name: str, width: int, desc: str) -> Port:
    return Port(name, "output", width, desc)


@dataclass
class Design:
    """What a family module returns: everything a Task needs except the bookkeeping."""
    top: str
    ports: list[Port]  # data inputs and outputs; clk and rst_n are added in front
    body: str  # RTL between the port list and `endmodule`
    summary: str  # one line for the RTL header comment
    description: str  # markdown paragraphs for the spec
    programs: dict[str, str]  # strong / medium / weak / compact vectors text
    params: dict = field(default_factory=dict)  # the random choices, kept in meta
    # The compact spec (Task.brief): the design facts stimulus depends on (magic values, sequences,
    # counts, opcodes), one short line each, stated on the input aliases (in0, in1, ...) so that a
    # prompt too short for the spec still carries them.
    brief: list[str] = field(default_factory=list)
    reset_desc: str = "asynchronous active-low reset; clears every register and flag."
    # Alternative compact programs, one per stimulus strategy of the family (name -> vectors text):
    # which of them reach the task's target depends on the design's parameters (targets.py records
    # it in meta["reaches"]), so tasks call for different skills.
    strategies: dict[str, str] = field(default_factory=dict)

    @property
    def all_ports(self) -> list[Port]:
        return [inp(CLK, 1, "clock; all state changes on the rising edge."), inp(RST, 1, self.reset_desc)] + self.ports


def pick_names(rng: random.Random, options: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """One name per role from its synonyms (roles are drawn in order, so the result is stable)."""
    return {role: rng.choice(names) for role, names in options.items()}


def vrange(width: int) -> str:
    return f"[{width - 1}:0] " if width > 1 else ""


def lit(width: int, value: int) -> str:
    """A sized SystemVerilog literal: 4'd9 for narrow values, 12'h3a7 for wide ones."""
    return f"{width}'d{value}" if width <= 4 else f"{width}'h{value:x}"


def hexv(width: int, value: int) -> str:
    digits = max(1, (width + 3) // 4)
    return f"0x{value:0{digits}x}"


def render_rtl(d: Design) -> str:
    decls = []
    for p in d.all_ports:
        decls.append(f"    {p.direction:<6} logic {vrange(p.width):<8}{p.name}")
    header = ",\n".join(decls)
    return (f"// {d.summary}\n"
            f"module {d.top} (\n{header}\n);\n{d.body.rstrip()}\nendmodule\n")


def a_n(number: int) -> str:
    """The article before a spoken number: "an 8-bit", "a 12-bit"."""
    return "an" if str(number).startswith("8") or number in (11, 18) else "a"


def width_words(w: int) -> str:
    return f"{w}-bit"


def render_spec(d: Design) -> str:
    ins = [p for p in d.all_ports if p.direction == "input"]
    outs = [p for p in d.all_ports if p.direction == "output"]
    lines = [f"Write a SystemVerilog testbench `tb_{d.top}` that instantiates the `{d.top}` module and drives "
             "input stimulus that exercises all of its behaviour. The testbench generates stimulus only; it does "
             "not need to check outputs.", "", "## Description", d.description.strip(), "", "### Inputs"]
    lines += [f"- `{p.name}` ({width_words(p.width)}): {p.desc}" for p in ins]
    lines += ["", "### Outputs"]
    lines += [f"- `{p.name}` ({width_words(p.width)}): {p.desc}" for p in outs]
    lines += ["", "## Instantiation", f"The testbench must instantiate `{d.top}` with the instance name `uut`.",
              "", "## Stimulus",
              "Aim for full code coverage of the design: every branch and condition outcome, and every register "
              "and port bit toggling both ways (reset included). Inputs change away from the rising clock edge; "
              "the design samples them on the rising edge.", ""]
    return "\n".join(lines)


def render_brief(d: Design) -> str:
    """The compact spec: the design's key facts as short bullets on the input aliases."""
    return "\n".join(["Key facts:", *(f"- {line}" for line in d.brief)]) if d.brief else ""


class Stim:
    """Writes `vectors` text on the aliases of a design's ports.

    `step(n, a=1, b=None)` sets port `a` to 1 and `b` to a fresh random value each cycle, then
    advances n cycles. Only values that change are written; inputs start at 0 (the harness
    holds them at 0 through its reset).
    """

    def __init__(self, ports: list[Port], comments: bool = True):
        names = [p for p in ports if p.direction == "input" and p.name not in (CLK, RST)]
        self.alias = {p.name: f"in{i}" for i, p in enumerate(names)}
        self.width = {p.name: p.width for p in names}
        self.cur: dict[str, int | None] = {p.name: 0 for p in names}
        self.lines: list = []  # comment strings and step lines, in order
        self._steps: list[_Line] = []
        self.comments = comments
        self.total = 0

    def note(self, text: str) -> "Stim":
        if self.comments:
            self.lines.append(f"# {text}")
        return self

    def step(self, cycles: int = 1, **values: int | None) -> "Stim":
        parts = []
        for name, v in values.items():
            if name not in self.alias:
                raise KeyError(f"no data input {name!r}")
            if v is None:
                parts.append(f"{self.alias[name]}=?")
                self.cur[name] = None
                continue
            v &= (1 << self.width[name]) - 1
            if self.cur[name] != v:
                parts.append(f"{self.alias[name]}={v if self.width[name] <= 3 else hexv(self.width[name], v)}")
                self.cur[name] = v
        self._emit(parts, cycles)
        return self

    def burst(self, cycles: int, **held: int) -> "Stim":
        """`cycles` cycles with every data input random except `held` (port -> value): one line
        such as `in0=? in1=? x200`."""
        unknown = set(held) - set(self.alias)
        if unknown:
            raise KeyError(f"no data input {sorted(unknown)[0]!r}")
        return self.step(cycles, **{n: held.get(n) for n in self.alias})

    def reset(self, cycles: int = 2) -> "Stim":
        self._emit(["rst"], cycles)
        return self

    def _emit(self, parts: list[str], cycles: int) -> None:
        if cycles < 1:
            return
        self.total += cycles
        if not parts and self._steps and self._steps[-1] is self.lines[-1]:
            last = self._steps[-1]
            if "rst" not in last.parts and not any(p.endswith("=?") for p in last.parts):
                last.cycles += cycles  # nothing changes: the previous line just lasts longer
                return
        line = _Line(parts, cycles)
        self._steps.append(line)
        self.lines.append(line)

    def text(self) -> str:
        return "\n".join(str(ln) for ln in self.lines) + "\n"


class _Line:
    def __init__(self, parts: list[str], cycles: int):
        self.parts, self.cycles = parts, cycles

    def __str__(self) -> str:
        return (" ".join(self.parts) if self.parts else ".") + (f" x{self.cycles}" if self.cycles != 1 else "")


def finish_with_reset(s: Stim, **quiet: int) -> Stim:
    """End of a strong program: a mid-run reset so sticky flags and rst_n toggle both ways."""
    s.note("reset again: sticky flags and rst_n fall back")
    s.reset(2)
    s.step(2, **quiet)
    return s


def vector_cycles(text: str) -> int:
    """Clock cycles a vectors program spans (its `xN` repeats summed; one per bare line)."""
    total = 0
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            last = line.split()[-1]
            total += int(last[1:]) if last[:1] == "x" and last[1:].isdigit() else 1
    return total


def split_of(k: int) -> str:
    """Every 4th design is held out for test, the one before it for validation (tuning); the rest train.
    By index, so a longer list keeps every earlier task's split."""
    return {3: "test", 2: "validation"}.get(k % 4, "train")


def make_task(family: str, k: int, seed: int, difficulty: str, d: Design, world: str | None = None) -> Task:
    """`world` names a design stream other than the plain difficulty's (MIXED) in the task id."""
    rtl = {f"rtl/{d.top}.sv": render_rtl(d)}
    task = Task(id=f"gen_{family}_{k}_s{seed}_{world or difficulty}", spec=render_spec(d), rtl=rtl, top=d.top,
                brief=render_brief(d),
                instance="uut", targets={"overall": 100.0}, difficulty=difficulty, source="generated",
                family=family, split=split_of(k),
                meta={"programs": dict(d.programs), "seed": seed, "index": k, "params": dict(d.params),
                      "cycles": {g: vector_cycles(p) for g, p in d.programs.items()}})
    if d.strategies:
        task.meta["strategies"] = dict(d.strategies)
    return task


def reference_testbench(task: Task) -> str:
    """The strong program rendered as a whole testbench (chorus's skeleton around body statements)."""
    from ...stimulus.aliases import alias_map  # local: aliases elaborate with pyslang
    from ...stimulus.formats import render
    from ...stimulus.program import parse_vectors

    amap = alias_map(task)
    return render("testbench", task, parse_vectors(task.meta["programs"]["strong"], amap))
