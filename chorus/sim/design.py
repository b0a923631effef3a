"""Static facts about a design's RTL, read with pyslang: module spans and unpacked arrays.

Module spans say where each design unit's source lies: the DUT instance is the hierarchy path
whose coverage points come from the top module's span of the task's own files (execute.score_points).
Unpacked arrays are left out of toggle coverage as IMC does.
"""
from __future__ import annotations

import functools
import posixpath
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

    def in_module(self, module: str, file: str, line: int) -> bool:
        """Does source position (file, line) lie inside a declaration of `module`?"""
        file = source_name(file)
        return any(source_name(m.file) == file and m.start <= line <= m.end for m in self.spans_of(module))


@functools.lru_cache(maxsize=4096)
def source_name(name: str) -> str:
    """One spelling per source file: coverage points name a file as Verilator was given it."""
    return posixpath.normpath(name)


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


def find_dut_instance(dut_paths: set[str], instance_name: str) -> tuple[str | None, bool]:
    """Choose the hierarchy path to score and whether it carries the required instance name.

    `dut_paths` are the instances of the DUT: paths with coverage points whose source lies in the
    top module's declaration in the task's own files (attribution by source, never by a module
    name, which a testbench chooses). Preference: the DUT instance named `instance_name`
    (shallowest first), else the shallowest DUT instance (instance_ok False).
    """
    duts = sorted(dut_paths, key=lambda p: (p.count("."), p))
    named = [p for p in duts if p.rsplit(".", 1)[-1] == instance_name]
    if named:
        return named[0], True
    if duts:
        return duts[0], False
    return None, False


@dataclass(frozen=True)
class Port:
    name: str
    direction: str  # input | output | inout | interface
    width: int
    type: str  # pyslang's rendering, e.g. logic[3:0]
    unpacked: bool = False


_DIRS = {"In": "input", "Out": "output", "InOut": "inout", "Ref": "inout"}


class PortError(ValueError):
    pass


def _find_instance(instances: list, module: str, depth: int = 0):
    """Breadth-first search for an instance of `module` (the DUT may sit under a wrapper)."""
    for inst in instances:
        if inst.definition.name == module:
            return inst
    children: list = []

    def collect(node) -> None:
        if type(node).__name__ == "InstanceSymbol":
            children.append(node)

    for inst in instances:
        for member in inst.body:
            member.visit(collect)
    if not children or depth > 32:
        return None
    return _find_instance(children, module, depth + 1)


def dut_parameters(files: tuple[tuple[str, str], ...], top: str,
                   defines: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    """`top`'s overridable value parameters -> their default values (pyslang's rendering), {} when
    the RTL does not elaborate."""
    from pyslang import ast as slang_ast

    comp = slang_ast.Compilation()
    prelude = "".join(f"`define {k} {v}\n" for k, v in defines)
    for name, text in files:
        comp.addSyntaxTree(syntax.SyntaxTree.fromText(prelude + text, name))
    inst = _find_instance(list(comp.getRoot().topInstances), top)
    if inst is None:
        return {}
    return {p.name: str(p.value) for p in inst.body.parameters
            if type(p).__name__ == "ParameterSymbol" and not p.isLocalParam}


def dut_ports(files: tuple[tuple[str, str], ...], top: str, defines: tuple[tuple[str, str], ...] = (),
              parameters: tuple[tuple[str, str], ...] = ()) -> list[Port]:
    """Elaborate the RTL with pyslang at `parameters` (Task.stated_parameters) and return `top`'s
    ports with resolved widths."""
    from pyslang import Bag
    from pyslang import ast as slang_ast

    options = slang_ast.CompilationOptions()
    options.paramOverrides = [f"{k}={v}" for k, v in parameters]
    comp = slang_ast.Compilation(Bag([options]))
    prelude = "".join(f"`define {k} {v}\n" for k, v in defines)
    for name, text in files:
        comp.addSyntaxTree(syntax.SyntaxTree.fromText(prelude + text, name))
    root = comp.getRoot()
    inst = _find_instance(list(root.topInstances), top)
    if inst is None:
        raise PortError(f"module {top} is not a top-level module of the RTL")
    ports = []
    for p in inst.body.portList:
        if not hasattr(p, "direction"):
            iface = getattr(p, "interfaceDef", None)
            ports.append(Port(p.name, "interface", 0, iface.name if iface is not None else "interface"))
            continue
        t = p.type
        ports.append(Port(p.name, _DIRS.get(p.direction.name, "inout"), int(t.bitWidth or 1), str(t),
                          bool(t.isUnpackedArray)))
    return ports
