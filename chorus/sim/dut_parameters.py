"""The design as specified: every DUT instance is elaborated at the parameters the task states.

A parameter override changes the design being measured (`#(.WIDTH(1))` shrinks it; `#(.DEBUG(1))`
adds a branch any clock covers), so a testbench may not choose them. Decided on Verilator's own
elaboration (`--json-only` dumps the tree after parameters are resolved): an instance's
*signature* is its module's parameter values and, recursively, those of every instance inside it
(a defparam on a submodule changes only that part). However a testbench spells an override
(named, positional, defparam, a macro), the signature shows the result. It must equal the
signature of the design elaborated alone at the task's parameters (Task.parameters: a fixed value,
or a list of allowed values; the defaults when it names none), computed once per design.
"""
from __future__ import annotations

import hashlib
import json
import re

from ..core.task import Task

_SCOPES = ("MODULE", "IFACE")


def instance_signatures(tree: dict, files: dict, module: str, sources: frozenset[str]) -> list[tuple[str, tuple]]:
    """(where, signature) of every instance of `module`, the design's own (declared in `sources`)."""
    from .design import source_name

    mods = {m.get("addr"): m for m in tree.get("modulesp") or [] if m.get("type") in _SCOPES}
    memo: dict = {}
    out = []
    for m in mods.values():
        for path, cell in _cells(m):
            target = mods.get(cell.get("modp"))
            if target is None or target.get("origName") != module:
                continue
            if source_name(_file(target, files)) not in sources:
                continue
            out.append((_where(cell, files), _signature(target, mods, memo)))
    return out


def _signature(module: dict, mods: dict, memo: dict, depth: int = 0) -> tuple:
    addr = module.get("addr")
    if addr in memo:
        return memo[addr]
    params = tuple(sorted(_params(module)))
    cells = []
    if depth < 256:  # elaboration bounds it anyway; a cycle cannot elaborate
        for path, cell in _cells(module):
            child = mods.get(cell.get("modp"))
            cells.append((path, child.get("origName") if child else "?",
                          _signature(child, mods, memo, depth + 1) if child else ()))
    memo[addr] = (params, tuple(sorted(cells)))
    return memo[addr]


def _params(module: dict):
    """(name, value) of the module's own parameters and type parameters, as Verilator resolved them."""
    for node in module.get("stmtsp") or []:
        if node.get("type") == "VAR" and node.get("varType") == "GPARAM":
            yield node.get("name", ""), _shape(node.get("valuep"))
        elif node.get("type") == "PARAMTYPEDTYPE":
            yield node.get("name", ""), _shape(node.get("childDTypep") or node.get("subDTypep"))


def _shape(node) -> str:
    """A value's tree with only its node types and names: addresses differ between two runs."""
    def strip(n):
        if isinstance(n, list):
            return [strip(x) for x in n]
        if isinstance(n, dict):
            return {k: strip(v) for k, v in n.items() if k in ("type", "name") or isinstance(v, (list, dict))}
        return n
    return json.dumps(strip(node), sort_keys=True)


def _cells(module: dict):
    """(path inside the module, CELL) of every instance, generate blocks included (`blk[0].u`)."""
    stack = [(node, "") for node in reversed(module.get("stmtsp") or [])]
    while stack:
        node, prefix = stack.pop()
        if not isinstance(node, dict):
            continue
        kind = node.get("type")
        if kind == "CELL":
            yield prefix + str(node.get("name", "")), node
        elif kind in ("GENBLOCK", "BEGIN", "GENFOR", "GENIF", "GENCASE"):
            inner = f"{prefix}{node['name']}." if node.get("name") else prefix
            for key, value in node.items():
                if isinstance(value, list):
                    stack.extend((x, inner) for x in reversed(value))
                elif isinstance(value, dict):
                    stack.append((value, inner))


def _file(node: dict, files: dict) -> str:
    return files.get(str(node.get("loc", "")).partition(",")[0], {}).get("filename", "")


def _where(node: dict, files: dict) -> str:
    letter, _, span = str(node.get("loc", "")).partition(",")
    return f"{files.get(letter, {}).get('filename', letter)}:{span.split(':')[0]}"


# ---------------------------------------------------------------- what the task states

def allowed_values(task: Task) -> dict[str, list[str]] | str:
    """Each parameter the task names -> its allowed values as SystemVerilog text (a fixed value is a
    list of one), or why they are malformed."""
    out = {}
    for name, value in sorted(task.parameters.items()):
        options = value if isinstance(value, list) else [value]
        if not options or not all(isinstance(v, (str, int)) for v in options):
            return f"task {task.id}: parameters.{name} must be a value or a list of values"
        out[name] = list(dict.fromkeys(str(v) for v in options))
    if sum(map(len, out.values())) > MAX_VALUES:
        return f"task {task.id}: its parameters list more than {MAX_VALUES} allowed values"
    return out


MAX_VALUES = 256  # allowed values one task may list, over all its parameters (each is elaborated once)
REFERENCE_TOP = "chorus_parameters_top"


def reference_wrapper(task: Task, cells: list[dict[str, str]], ports) -> str:
    """A top instantiating the DUT once per assignment in `cells` (chorus_dut_<i>); interface ports
    get an interface instance each (Verilator refuses them on a top module), other ports stay open."""
    lines = [f"module {REFERENCE_TOP};"]
    ifaces = [p for p in ports if p.direction == "interface"]
    for i, assignment in enumerate(cells):
        params = ", ".join(f".{k}({v})" for k, v in assignment.items())
        for p in ifaces:
            lines.append(f"  {p.type} chorus_{p.name}_{i}();")
        pins = ", ".join(f".{p.name}(chorus_{p.name}_{i})" for p in ifaces)
        lines.append(f"  {task.top} {'#(' + params + ') ' if params else ''}chorus_dut_{i}({pins});")
    lines.append("endmodule")
    return "\n".join(lines) + "\n"


def value_cells(allowed: dict[str, list[str]]) -> list[tuple[str | None, dict[str, str]]]:
    """The assignments that show what each allowed value elaborates to: the stated one (each
    parameter's first value), then each other value of one parameter on top of it."""
    base = {k: v[0] for k, v in allowed.items()}
    cells: list[tuple[str | None, dict[str, str]]] = [(None, base)]
    cells += [(k, {**base, k: v}) for k, values in allowed.items() for v in values[1:]]
    return cells


def cell_signatures(tree: dict, files: dict, task: Task, sources: frozenset[str]) -> dict[str, tuple]:
    """Instance name -> signature, for the DUT cells of a reference elaboration."""
    return {where_name: sig for where_name, sig in _named_signatures(tree, files, task.top, sources)}


def _named_signatures(tree: dict, files: dict, module: str, sources: frozenset[str]):
    from .design import source_name

    mods = {m.get("addr"): m for m in tree.get("modulesp") or [] if m.get("type") in _SCOPES}
    memo: dict = {}
    for m in mods.values():
        if m.get("origName") != REFERENCE_TOP:
            continue
        for path, cell in _cells(m):
            target = mods.get(cell.get("modp"))
            if target is not None and target.get("origName") == module and \
                    source_name(_file(target, files)) in sources:
                yield path, _signature(target, mods, memo)


def parameters_key(task: Task) -> str:
    return hashlib.sha256(json.dumps(task.parameters, sort_keys=True).encode()).hexdigest()[:16]


# ---------------------------------------------------------------- the verdict

def override_problem(found: list[tuple[str, tuple]], texts: dict[str, dict[str, str]], reference, top: str) -> str | None:
    """Why an instance of the DUT is not the design as the task states it, or None.

    `texts`: each named parameter -> {what an allowed value elaborates to: its text}; `reference(
    assignment)`: the signature of the design elaborated alone at that assignment of the named
    parameters (or a task error). The instance's named parameters must each take an allowed value,
    and then everything (the other parameters, every instance inside) must be what the design
    elaborates to at those values."""
    for where, sig in found:
        own = dict(sig[0])
        assignment = {}
        for name, allowed in texts.items():
            if own.get(name) not in allowed:
                return _refusal(where, top, f"{name} = {_pretty(own.get(name, '?'))}", list(allowed.values()))
            assignment[name] = allowed[own[name]]
        want = reference(tuple(sorted(assignment.items())))
        if isinstance(want, str):
            return want
        if sig == want:
            continue
        stated = dict(want[0])
        diff = [f"{n} = {_pretty(v)}" for n, v in sig[0] if stated.get(n) != v]
        if diff:
            return _refusal(where, top, ", ".join(diff), [", ".join(f"{n} = {_pretty(stated[n])}" for n, v in sig[0]
                                                                  if stated.get(n) != v and n in stated)])
        return (f"{where}: this instance of {top} has parameters inside it other than the design's (a defparam on a "
                "submodule?); the task fixes its parameters, so coverage is of the design as specified")
    return None


def _refusal(where: str, top: str, found: str, allowed: list[str]) -> str:
    return (f"{where}: this instance of {top} has {found}, where the task states "
            f"{' or '.join(allowed) if allowed else 'other values'}; the task fixes its parameters, so coverage is "
            "of the design as specified (remove the override or defparam)")


_CONST = re.compile(r'"name": "(\d+)\'s?h([0-9a-fA-F]+)"')


def _pretty(shape: str) -> str:
    m = _CONST.search(shape)
    return str(int(m[2], 16)) if m else shape[:60]
