"""Verilator coverage.dat parsing and the CVDP-style coverage metric.

Each data line is ``C '<key>' <count>`` where the key is a run of ``\\x01name\\x02value``
fields (f file, l line, t type, o comment, S source lines, h hierarchy, page ...).
The metric mirrors Cadence IMC's "Overall Average" as CVDP scores it: the unweighted mean
of the metric types that have items in the DUT instance's subtree, where
  block      = line and branch points,
  expression = expr rows,
  toggle     = signal bits that toggled both 0->1 and 1->0 (unpacked arrays left out),
  assertion  = user cover points.
"""
from __future__ import annotations

import functools
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable

METRICS = ("block", "expression", "toggle", "assertion")
_LINE = re.compile(r"^C '(?P<key>.*)' (?P<count>\d+)\s*$")
_TOGGLE_DIR = re.compile(r"^(?P<sig>.*):(?P<dir>0->1|1->0)$")
_BASE_NAME = re.compile(r"^([^\[.]+)")


class CoverageFormatError(ValueError):
    pass


@dataclass(frozen=True)
class Point:
    file: str
    line: int
    type: str
    comment: str
    hier: str
    count: int
    source_lines: str = ""
    module: str = ""  # the module whose code declared the point (Verilator's page field)


def parse_coverage_text(text: str) -> list[Point]:
    """Parse coverage.dat text; repeated keys are summed (that is how merging works)."""
    counts: dict[str, int] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw or raw.startswith("#"):
            continue
        m = _LINE.match(raw)
        if not m:
            raise CoverageFormatError(f"coverage.dat line {n} is not `C '<key>' <count>`: {raw[:80]!r}")
        counts[m["key"]] = counts.get(m["key"], 0) + int(m["count"])
    return [_point(key, c) for key, c in counts.items()]


def _point(key: str, count: int) -> Point:
    file, line, type_, comment, hier, source_lines, module = _key_fields(key)
    return Point(file=file, line=line, type=type_, comment=comment, hier=hier, count=count,
                 source_lines=source_lines, module=module)


# Every run of one design writes the same keys (only the counts change): each is split once.
@functools.lru_cache(maxsize=1 << 15)
def _key_fields(key: str) -> tuple[str, int, str, str, str, str, str]:
    fields = {}
    for part in key.split("\x01")[1:]:
        name, _, value = part.partition("\x02")
        fields[name] = value
    try:
        line = int(fields.get("l", "0"))
    except ValueError:
        line = 0
    # page is `v_<type>/<module>`: Verilator names the module itself, whatever `line says.
    module = fields.get("page", "").partition("/")[2]
    return (fields.get("f", ""), line, fields.get("t", ""), fields.get("o", ""), fields.get("h", ""),
            fields.get("S", ""), module)


def merge_points(*point_lists: Iterable[Point]) -> list[Point]:
    acc: dict[tuple, int] = defaultdict(int)
    proto: dict[tuple, Point] = {}
    for pts in point_lists:
        for p in pts:
            k = (p.file, p.line, p.type, p.comment, p.hier, p.source_lines, p.module)
            acc[k] += p.count
            proto[k] = p
    return [Point(**{**asdict(proto[k]), "count": c}) for k, c in acc.items()]


def parse_coverage_file(path: Path) -> list[Point]:
    return parse_coverage_text(Path(path).read_text(errors="replace"))


def in_subtree(hier: str, root: str) -> bool:
    return hier == root or hier.startswith(root + ".")


@dataclass
class Uncovered:
    metric: str
    file: str
    line: int
    hier: str
    what: str
    source: str = ""


@dataclass
class CoverageReport:
    instance: str | None  # hierarchy path scored, e.g. TOP.tb.uut
    instance_ok: bool  # found under the required instance name
    metrics: dict[str, float] = field(default_factory=dict)  # percent, only types with items
    counts: dict[str, list[int]] = field(default_factory=dict)  # metric -> [covered, total]
    overall: float | None = None  # percent
    uncovered: list[Uncovered] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "CoverageReport":
        d = dict(d)
        d["uncovered"] = [Uncovered(**u) for u in d.get("uncovered", [])]
        return cls(**d)


def compute_metrics(points: list[Point], root: str, instance_ok: bool = True,
                    excluded_toggles: set[tuple[str, int, str]] = frozenset(),
                    sources: dict[str, str] | None = None, max_uncovered: int = 200) -> CoverageReport:
    """Score the points under hierarchy `root`.

    `excluded_toggles` holds (file, line, signal) of unpacked arrays, which IMC leaves out.
    `sources` maps file name to text, used to quote uncovered lines.
    """
    covered = {m: 0 for m in METRICS}
    total = {m: 0 for m in METRICS}
    uncovered: list[Uncovered] = []
    toggles: dict[tuple[str, str, str, int], list[int]] = {}
    for p in points:
        if not in_subtree(p.hier, root):
            continue
        if p.type in ("line", "branch"):
            metric = "block"
        elif p.type == "expr":
            metric = "expression"
        elif p.type == "user":
            metric = "assertion"
        elif p.type == "toggle":
            m = _TOGGLE_DIR.match(p.comment)
            sig = m["sig"] if m else p.comment
            base = _BASE_NAME.match(sig)
            if base and (p.file, p.line, base.group(1)) in excluded_toggles:
                continue
            toggles.setdefault((p.hier, p.file, sig, p.line), []).append(p.count)
            continue
        else:
            continue
        total[metric] += 1
        if p.count > 0:
            covered[metric] += 1
        else:
            uncovered.append(Uncovered(metric, p.file, p.line, p.hier, f"{p.type} {p.comment}".strip()))
    for (hier, file, sig, line), cs in toggles.items():
        total["toggle"] += 1
        # A bit is covered only when both directions were seen (two points, both hit).
        if len(cs) >= 2 and all(c > 0 for c in cs):
            covered["toggle"] += 1
        else:
            uncovered.append(Uncovered("toggle", file, line, hier, f"toggle {sig}"))
    metrics = {m: 100.0 * covered[m] / total[m] for m in METRICS if total[m] > 0}
    overall = sum(metrics.values()) / len(metrics) if metrics else None
    uncovered.sort(key=lambda u: (u.metric != "block", u.file, u.line))
    if sources:
        for u in uncovered[:max_uncovered]:
            lines = sources.get(u.file, sources.get(Path(u.file).name, "")).splitlines()
            if 0 < u.line <= len(lines):
                u.source = lines[u.line - 1].strip()[:200]
    return CoverageReport(instance=root, instance_ok=instance_ok, metrics=metrics,
                          counts={m: [covered[m], total[m]] for m in METRICS if total[m] > 0},
                          overall=overall, uncovered=uncovered[:max_uncovered])
