"""Static facts about a design's RTL, read with pyslang: module spans and unpacked arrays.

Coverage points carry file, line and hierarchy but no module name, so the DUT's instances
are found by which module's source span their points fall in.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

from pyslang import syntax

_SK = syntax.SyntaxKind
_MODULE_KINDS = {_SK.ModuleDeclaration, _SK.InterfaceDeclaration, _SK.ProgramDeclaration}


@dataclass(frozen=True)
class ModuleSpan:
    name: str
    file: str
    start: int
    end: int


@dataclass(frozen=True)
class DesignFacts:
    modules: tuple[ModuleSpan, ...] = ()
    unpacked: frozenset[tuple[str, int, str]] = field(default_factory=frozenset)

    @property
    def module_names(self) -> set[str]:
        return {m.name for m in self.modules}

    def spans_of(self, module: str) -> list[ModuleSpan]:
        return [m for m in self.modules if m.name == module]


def _facts_for_file(name: str, text: str, defines: tuple[tuple[str, str], ...]) -> tuple[list, set]:
    prelude = "".join(f"`define {k} {v}\n" for k, v in defines)
    tree = syntax.SyntaxTree.fromText(prelude + text, name)
    sm = tree.sourceManager
    shift = prelude.count("\n")
    modules, unpacked = [], set()

    def visit(node):
        kind = getattr(node, "kind", None)
        if kind in _MODULE_KINDS:
            modules.append(ModuleSpan(node.header.name.valueText, name,
                                      sm.getLineNumber(node.sourceRange.start) - shift,
                                      sm.getLineNumber(node.sourceRange.end) - shift))
        elif kind == _SK.Declarator and len(node.dimensions) > 0:
            unpacked.add((name, sm.getLineNumber(node.name.location) - shift, node.name.valueText))
        return True

    tree.root.visit(visit)
    return modules, unpacked


@functools.lru_cache(maxsize=512)
def design_facts(files: tuple[tuple[str, str], ...], defines: tuple[tuple[str, str], ...] = ()) -> DesignFacts:
    """`files` is ((name, text), ...) exactly as the simulator sees them."""
    modules, unpacked = [], set()
    for name, text in files:
        m, u = _facts_for_file(name, text, defines)
        modules += m
        unpacked |= u
    return DesignFacts(tuple(modules), frozenset(unpacked))


def find_dut_instance(point_locs: dict[str, set[tuple[str, int]]], facts: DesignFacts, dut_module: str,
                      instance_name: str) -> tuple[str | None, bool]:
    """Choose the hierarchy path to score and whether it carries the required instance name.

    `point_locs` maps each hierarchy path to the (file, line) locations of its own points.
    Preference: an instance of the DUT module named `instance_name` (shallowest first);
    then any path named `instance_name` when the DUT module's source is unknown; then the
    shallowest instance of the DUT module (the ECov fallback, instance_ok False).
    """
    paths = set()
    for h in point_locs:
        parts = h.split(".")
        paths.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    spans = facts.spans_of(dut_module)

    def is_dut(path: str) -> bool:
        locs = point_locs.get(path)
        if not locs or not spans:
            return False
        inside = sum(any(f == s.file and s.start <= ln <= s.end for s in spans) for f, ln in locs)
        return inside == len(locs)

    def order(p: str) -> tuple[int, str]:
        return (p.count("."), p)

    named = sorted((p for p in paths if p.rsplit(".", 1)[-1] == instance_name), key=order)
    named_dut = [p for p in named if is_dut(p)]
    if named_dut:
        return named_dut[0], True
    if named and not spans:
        return named[0], True
    duts = sorted((p for p in paths if is_dut(p)), key=order)
    if duts:
        return duts[0], False
    return None, False
