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
import itertools
import json
import re

from ..tasks.schema import Task

MAX_COMBINATIONS = 64  # allowed-value combinations one task may declare (each is elaborated once)
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

def stated_combinations(task: Task) -> list[dict[str, str]] | str:
    """Each allowed assignment of the task's parameters ({} = the defaults), or why it is malformed."""
    names, choices = [], []
    for name, value in sorted(task.parameters.items()):
        options = value if isinstance(value, list) else [value]
        if not options or not all(isinstance(v, (str, int)) for v in options):
            return f"task {task.id}: parameters.{name} must be a value or a list of values"
        names.append(name)
        choices.append([str(v) for v in options])
    combos = [dict(zip(names, c)) for c in itertools.product(*choices)]
    if len(combos) > MAX_COMBINATIONS:
        return f"task {task.id}: its parameters allow {len(combos)} combinations, over {MAX_COMBINATIONS}"
    return combos


def reference_wrapper(task: Task, combos: list[dict[str, str]], ports) -> str:
    """A top instantiating the DUT once per allowed combination; interface ports get an interface
    instance each (Verilator refuses them on a top module), other ports stay open."""
    lines = [f"module {REFERENCE_TOP};"]
    ifaces = [p for p in ports if p.direction == "interface"]
    for i, combo in enumerate(combos):
        params = ", ".join(f".{k}({v})" for k, v in combo.items())
        for p in ifaces:
            lines.append(f"  {p.type} chorus_{p.name}_{i}();")
        pins = ", ".join(f".{p.name}(chorus_{p.name}_{i})" for p in ifaces)
        lines.append(f"  {task.top} {'#(' + params + ') ' if params else ''}chorus_dut_{i}({pins});")
    lines.append("endmodule")
    return "\n".join(lines) + "\n"


REFERENCE_TOP = "chorus_parameters_top"


def parameters_key(task: Task) -> str:
    return hashlib.sha256(json.dumps(task.parameters, sort_keys=True).encode()).hexdigest()[:16]


def read_reference(tree: dict, files: dict, task: Task, sources: frozenset[str]) -> set[tuple]:
    return {sig for _, sig in instance_signatures(tree, files, task.top, sources)}


# ---------------------------------------------------------------- the verdict

def override_problem(found: list[tuple[str, tuple]], allowed: set[tuple], top: str) -> str | None:
    """Why an instance of the DUT is not the design as the task states it, or None."""
    for where, sig in found:
        if sig in allowed:
            continue
        want = next(iter(allowed), ((), ()))
        diff = [f"{name} = {_pretty(v)} (the task states {_pretty(dict(want[0]).get(name, '?'))})"
                for name, v in sig[0] if dict(want[0]).get(name) != v]
        what = ("parameters " + ", ".join(diff)) if diff else "parameters inside it (a defparam on a submodule?)"
        return (f"{where}: this instance of {top} has {what}; the task fixes its parameters, so coverage is of the "
                "design as specified (remove the override or defparam)")
    return None


_CONST = re.compile(r'"name": "(\d+)\'s?h([0-9a-fA-F]+)"')


def _pretty(shape: str) -> str:
    m = _CONST.search(shape)
    return str(int(m[2], 16)) if m else shape[:60]
