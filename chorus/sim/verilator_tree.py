"""One walk over Verilator's own parse tree (`--json-only`): the facts the safety verdicts read.

Verilator has linked every reference to what it names (a variable, a subroutine, an interface
instance), so these facts hold however the source spelt them. tree_verdict.judge decides host
code and names on them; dut_boundary.breach decides the DUT's boundary.
"""
from __future__ import annotations

from dataclasses import dataclass, field

HOST_NODES = {"SYSTEMT": "$system", "SYSTEMF": "$system", "CSTMTUSER": "$c", "CEXPRUSER": "$c",
              "SYSTEMCSECTION": "`systemc section"}
_SCOPES = {"MODULE", "PACKAGE", "CLASS", "IFACE", "PRIMITIVE"}


@dataclass
class Seen:
    """What one walk of Verilator's tree found. Addresses are Verilator's node ids ("(AB)"); a scope
    is the enclosing module, interface, package or class by its original name."""
    owner: dict = field(default_factory=dict)  # VAR -> declaring scope (interface members left out)
    kinds: dict = field(default_factory=dict)  # scope name -> MODULE | IFACE | PACKAGE | CLASS | PRIMITIVE
    iface_vars: set = field(default_factory=set)  # VARs declared in an interface (its signals)
    handles: dict = field(default_factory=dict)  # IFACEREF VAR (an interface instance or port) -> declaring scope
    state: set = field(default_factory=set)  # VARs that are module/package/interface state: not subroutine
    # locals, not per-object class members (static members are state)
    directions: dict = field(default_factory=dict)  # VAR -> INPUT | OUTPUT | INOUT | NONE
    names: dict = field(default_factory=dict)  # VAR -> its name
    modules: dict = field(default_factory=dict)  # MODULE or IFACE address -> its original name
    subs: dict = field(default_factory=dict)  # TASK/FUNC -> (kind of its scope, scope name)
    funcs: set = field(default_factory=set)  # the FUNC addresses among subs (no timing, one result)
    sub_refs: dict = field(default_factory=dict)  # TASK/FUNC -> every VAR referenced inside it
    constants: set = field(default_factory=set)  # parameter and localparam VARs
    host: list = field(default_factory=list)  # (scope, what, where)
    # (scope, var, name, where, enclosing PIN record or None, enclosing TASK/FUNC or "")
    writes: list = field(default_factory=list)
    refs: list = field(default_factory=list)  # every VARREF/VARXREF: (scope, var, name, where)
    calls: list = field(default_factory=list)  # (scope, TASK/FUNC, name, dotted path, where, enclosing TASK/FUNC)
    pins: list = field(default_factory=list)  # [scope, cell's module address, port VAR, [(var, access)]]
    cells: list = field(default_factory=list)  # (scope, instance name, cell's module or interface, where)
    blocks: list = field(default_factory=list)  # named begin/generate blocks: (scope, name, where)



def walk(tree: dict, files: dict, std_file: str | None = None) -> Seen:
    """One pass over Verilator's tree. `std_file`: the real path of Verilator's verilated_std.sv;
    host code counts everywhere except inside the `std` package read from that file."""
    seen = Seen()
    # node, enclosing scope, kind of that scope, inside std, enclosing PIN record, enclosing TASK/FUNC
    stack = [(tree, "", "", False, None, "")]
    while stack:
        node, scope, kind_of_scope, in_std, pin, sub = stack.pop()
        if isinstance(node, list):
            stack.extend((x, scope, kind_of_scope, in_std, pin, sub) for x in node)
            continue
        if not isinstance(node, dict):
            continue
        kind = node.get("type")
        if kind in _SCOPES:
            scope, kind_of_scope = node.get("origName") or node.get("name") or "", kind
            seen.kinds.setdefault(scope, kind)
            if kind in ("MODULE", "IFACE"):
                seen.modules[node.get("addr", "")] = scope
            if kind == "PACKAGE" and scope == "std" and std_file and _file_of(node, files) == std_file:
                in_std = True
        elif kind == "VAR":
            _var(seen, node, scope, kind_of_scope)
        elif kind in ("TASK", "FUNC"):
            sub = node.get("addr", "")
            seen.subs[sub] = (kind_of_scope, scope)
            if kind == "FUNC":
                seen.funcs.add(sub)
            if node.get("dpiImport") or node.get("dpiExport"):
                seen.host.append((scope, f"DPI {'import' if node.get('dpiImport') else 'export'}",
                                  _where(node, files)))
        elif kind in ("TASKREF", "FUNCREF", "METHODCALL"):
            seen.calls.append((scope, node.get("taskp", ""), str(node.get("name", "")), node.get("dotted") or "",
                               _where(node, files), sub))
        elif kind in ("BEGIN", "GENBLOCK") and node.get("name"):
            seen.blocks.append((scope, str(node["name"]), _where(node, files)))
        elif kind == "CELL":
            seen.cells.append((scope, str(node.get("name", "")), node.get("modp", ""), _where(node, files)))
            stack.extend((v, scope, kind_of_scope, in_std, (node.get("modp", ""),), sub) for v in node.values()
                         if isinstance(v, (dict, list)))
            continue
        elif kind == "PIN" and pin is not None:
            pin = [scope, pin[0], node.get("modVarp", ""), []]
            seen.pins.append(pin)
        elif kind in HOST_NODES and not in_std:
            seen.host.append((scope, HOST_NODES[kind], _where(node, files)))
        elif kind in ("VARREF", "VARXREF"):
            var, dotted = node.get("varp", ""), node.get("dotted") or ""
            name = f"{dotted}.{node.get('name')}".lstrip(".")
            if isinstance(pin, list):
                pin[3].append((var, node.get("access")))
            seen.refs.append((scope, var, name, _where(node, files)))
            if sub:
                seen.sub_refs.setdefault(sub, set()).add(var)
            if node.get("access") in ("WR", "RW"):
                seen.writes.append((scope, var, name, _where(node, files), pin if isinstance(pin, list) else None,
                                    sub))
        elif kind == "MEMBERSEL" and _written_base(node):
            # `h.q = ...` through a virtual interface handle (or a struct or object): the member is varp
            seen.writes.append((scope, node.get("varp", ""), f"{_base_name(node)}.{node.get('name')}",
                                _where(node, files), pin if isinstance(pin, list) else None, sub))
        stack.extend((v, scope, kind_of_scope, in_std, pin, sub) for v in node.values() if isinstance(v, (dict, list)))
    return seen


def _var(seen: Seen, node: dict, scope: str, kind_of_scope: str) -> None:
    addr = node.get("addr", "")
    if node.get("varType") in ("GPARAM", "LPARAM"):
        seen.constants.add(addr)
    seen.directions[addr], seen.names[addr] = node.get("direction", "NONE"), node.get("name", "")
    if node.get("varType") == "IFACEREF":
        seen.handles[addr] = scope
        return
    if kind_of_scope == "IFACE":
        seen.iface_vars.add(addr)
    else:
        seen.owner[addr] = scope
    member = node.get("varType") == "MEMBER"
    if not node.get("isFuncLocal") and (not member or str(node.get("lifetime", "")).startswith("VSTATIC")):
        seen.state.add(addr)


def _root_ref(node: dict) -> dict | None:
    """The variable reference a member or element select is taken from: down `fromp` through any
    selects (an array, queue or associative element, another member) to its VARREF/VARXREF."""
    for _ in range(256):
        base = node.get("fromp")
        base = base[0] if isinstance(base, list) and base else base
        if not isinstance(base, dict):
            return None
        if base.get("type") in ("VARREF", "VARXREF"):
            return base
        node = base
    return None


def _written_base(node: dict) -> bool:
    root = _root_ref(node)
    return root is not None and root.get("access") in ("WR", "RW")


def _base_name(node: dict) -> str:
    root = _root_ref(node)
    return "?" if root is None else f"{root.get('dotted') or ''}.{root.get('name', '?')}".lstrip(".")


def _file_of(node: dict, files: dict) -> str:
    letter = str(node.get("loc", "")).partition(",")[0]
    return files.get(letter, {}).get("realpath", "")


def _where(node: dict, files: dict) -> str:
    loc = str(node.get("loc", ""))
    letter, _, span = loc.partition(",")
    name = files.get(letter, {}).get("filename", letter)
    return f"{name}:{span.split(':')[0]}" if span else name
