"""The last word on safety: Verilator's own parse tree of the design and the testbench.

safety.py checks the preprocessed testbench with pyslang, which gives fast, well-worded answers;
but two lexers can disagree (Verilator ends an attribute `(* .. *)` at the first `*)`, even
inside a string, where pyslang sees one string literal). So before the build, Verilator itself
parses exactly what it will compile (`--json-only`, jailed) and chorus walks that tree:

- host code: $system/$c nodes (SYSTEMT, SYSTEMF, CSTMTUSER, CEXPRUSER), `systemc_* sections and
  DPI imports/exports, anywhere but in Verilator's own `std` package. In the testbench they are
  `rejected`; in the task's RTL they are a task error unless the tasks are trusted.
- the DUT's boundary: testbench code reaches the DUT only through its ports. Verilator has linked
  every reference to what it names (variable, subroutine, interface instance), so the rules in
  `judge` hold however a reference was spelt: a write to design state, a call into the DUT, a
  handle on an interface inside it, a write to what the DUT drives (an interface signal, or the
  net on a DUT output, by a procedural write or a second driver).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .build import build_jail, define_args, verilator_errors
from .config import SimConfig
from .process import run_limited
from .toolchain import WARNING_FLAGS, Toolchain

HOST_NODES = {"SYSTEMT": "$system", "SYSTEMF": "$system", "CSTMTUSER": "$c", "CEXPRUSER": "$c",
              "SYSTEMCSECTION": "`systemc section"}
_SCOPES = {"MODULE", "PACKAGE", "CLASS", "IFACE", "PRIMITIVE"}


@dataclass
class AstVerdict:
    status: str = "ok"  # ok | rejected | task_error | compile_error | setup
    reason: str = ""
    log: str = ""


def check_ast(tc: Toolchain, cfg: SimConfig, cache_root: Path, workdir: Path, sources: list[str], top: str,
              defines: dict[str, str], design_units: set[str], trusted_rtl: bool,
              allow_dut_writes: bool = False) -> AstVerdict:
    design, out = workdir / "design", workdir / "out"
    ast_dir = workdir / "ast"
    ast_dir.mkdir(exist_ok=True)
    cmd = [str(tc.verilator), "--json-only", "--timing", "--timescale", "1ns/1ps", *WARNING_FLAGS,
           *cfg.extra_verilator_flags, "--top-module", top, "--Mdir", str(ast_dir), "--prefix", "Vast",
           *define_args(defines), *sources]
    r = run_limited(cmd, cwd=design, env=tc.env(), timeout_s=cfg.build_timeout_s, log_path=out / "ast.log",
                    mem_mb=cfg.mem_limit_mb, file_mb=512, jail=build_jail(cfg, cache_root, (design,), (ast_dir,)))
    if r.setup_error:
        return AstVerdict("setup", f"isolation could not be set up: {r.setup_error}")
    if r.timed_out or r.signal is not None or r.returncode != 0:
        errors = verilator_errors(r.log)
        why = errors[0][:300] if errors else ("Verilator did not finish" if r.timed_out else
                                              f"Verilator stopped (exit {r.returncode}, signal {r.signal})")
        return AstVerdict("compile_error", why, r.log)
    try:
        tree = json.loads((ast_dir / "Vast.tree.json").read_text())
        files = json.loads((ast_dir / "Vast.tree.meta.json").read_text()).get("files", {})
    except (OSError, ValueError) as exc:
        return AstVerdict("compile_error", f"Verilator's parse tree is unreadable: {exc}", r.log)
    std_file = str((tc.root / "include" / "verilated_std.sv").resolve())
    return judge(tree, files, design_units, trusted_rtl, allow_dut_writes, std_file)


def judge(tree: dict, files: dict, design_units: set[str], trusted_rtl: bool,
          allow_dut_writes: bool = False, std_file: str | None = None) -> AstVerdict:
    """Walk the tree once, then decide (testbench code is code whose scope is not a design unit):

    - host code anywhere but in Verilator's own `std` package (its mailbox, semaphore and process
      use $c; the testbench cannot add code there: a second `std` package does not elaborate);
    - instance names with a dot or bracket, which would read as extra hierarchy levels;
    - and, unless simulator.allow_dut_writes, anything that reaches the DUT other than through its
      ports. The DUT's state is what Verilator links to a design scope, however it was named:
      1. a write to a variable a design module or package declares;
      2. a call of a task or function a design module declares (its body may write the DUT),
         or of an interface's subroutine through a path that enters a DUT instance;
      3. any reference to an interface instance a design module declares (a virtual interface
         handle or an interface-port actual would let later writes reach it without a name);
      4. a write to an interface member through a path that enters a DUT instance, or to a member
         the design itself drives (through an interface port or its own instance): the testbench
         owns its interface instances, but not the signals the DUT drives into them;
      5. a second driver on a testbench net that a DUT output port drives, be it a procedural or
         continuous write or another cell's output: after inlining the net is the DUT's own
         variable, so writing it writes the DUT.
    Reads of DUT internals stay allowed (white-box checks)."""
    seen = _walk(tree, files, std_file)
    for scope, what, where in seen.host:
        if scope in design_units:
            if not trusted_rtl:
                return AstVerdict("task_error", f"uses {what} ({where})")
        else:
            return AstVerdict("rejected", f"{where}: {what} is not allowed (host code; found in Verilator's own "
                              "parse of the testbench)")
    for scope, name, where in seen.cells:
        if scope not in design_units and any(c in name for c in ".[] "):
            return AstVerdict("rejected", f"{where}: instance name {name!r} would be read as a hierarchy path; "
                              "use a plain identifier")
    if allow_dut_writes:
        return AstVerdict()
    why = _boundary_breach(seen, design_units)
    return AstVerdict("rejected", f"{why}; drive the DUT through its ports instead (reading internals is fine; "
                      "simulator.allow_dut_writes=true permits it)") if why else AstVerdict()


def _boundary_breach(seen: "_Seen", design_units: set[str]) -> str | None:
    """Why testbench code reaches the DUT other than through its ports (rules 1-5 of judge), or None."""
    design_modules = {a for a, name in seen.modules.items() if name in design_units}
    dut_cells = {name for scope, name, modp in seen.cell_modules if modp in design_modules
                 and scope not in design_units}
    through_dut = (lambda dotted: bool(dut_cells) and any(p.split("[")[0] in dut_cells for p in dotted.split(".")))
    for scope, sub, name, dotted, where in seen.calls:
        owner_kind, owner = seen.subs.get(sub, ("", ""))
        if scope in design_units or owner not in design_units:
            continue
        if owner_kind == "MODULE" or (owner_kind == "IFACE" and through_dut(dotted)):
            return f"{where}: a call of {f'{dotted}.{name}'.lstrip('.')}, a subroutine of the DUT, may write " \
                   "into the DUT's internals"
    for scope, var, name, where in seen.xrefs:
        if scope not in design_units and seen.handles.get(var) in design_units:
            return f"{where}: a reference to {name}, an interface instance inside the DUT, lets later writes " \
                   "reach the DUT's internals (a virtual interface or an interface port)"
    design_driven = {var for scope, var, *_ in seen.writes if scope in design_units and var in seen.iface_vars}
    driving_pins = {}  # testbench variable -> (the DUT's output port name, the PIN record that drives it)
    for pin in seen.pins:
        scope, modp, port_var, refs = pin
        if scope not in design_units and modp in design_modules and seen.directions.get(port_var) == "OUTPUT":
            for var, access in refs:
                if access in ("WR", "RW"):
                    driving_pins.setdefault(var, (seen.names.get(port_var, "?"), id(pin)))
    for scope, var, name, where, pin in seen.writes:
        if scope in design_units:
            continue
        if seen.owner.get(var) in design_units:
            return f"{where}: a write to {name} writes into the DUT's internals (found in Verilator's own parse)"
        if var in seen.iface_vars and through_dut(name.rpartition(".")[0]):
            return f"{where}: a write to {name} writes into the DUT's internals (an interface inside the DUT)"
        if var in design_driven:
            return f"{where}: a write to {name}, an interface signal the DUT drives, writes into the DUT's internals"
        if var in driving_pins and driving_pins[var][1] != id(pin):
            how = "a second driver (another cell's output)" if pin is not None else "a write"
            return f"{where}: {how} on {name}, which the DUT's output port {driving_pins[var][0]} drives, " \
                   "writes into the DUT's internals; only the DUT may drive its outputs"
    return None


@dataclass
class _Seen:
    owner: dict = field(default_factory=dict)  # VAR address -> declaring scope (interfaces left out)
    iface_vars: set = field(default_factory=set)  # VAR addresses declared in an interface
    handles: dict = field(default_factory=dict)  # IFACEREF VAR address (an interface instance) -> declaring scope
    directions: dict = field(default_factory=dict)  # VAR address -> INPUT | OUTPUT | INOUT | NONE
    names: dict = field(default_factory=dict)  # VAR address -> its name
    modules: dict = field(default_factory=dict)  # MODULE address -> its original name
    subs: dict = field(default_factory=dict)  # TASK/FUNC address -> (kind of its scope, scope name)
    host: list = field(default_factory=list)  # (scope, what, where)
    writes: list = field(default_factory=list)  # (scope, var address, name, where, enclosing PIN record or None)
    xrefs: list = field(default_factory=list)  # hierarchical references: (scope, var address, name, where)
    calls: list = field(default_factory=list)  # (scope, TASK/FUNC address, name, dotted path, where)
    pins: list = field(default_factory=list)  # [scope, cell's module address, port VAR address, [(var, access)]]
    cells: list = field(default_factory=list)  # (scope, instance name, where)
    cell_modules: list = field(default_factory=list)  # (scope, instance name, cell's module address)


def _walk(tree: dict, files: dict, std_file: str | None = None) -> _Seen:
    """One pass over Verilator's tree. `std_file`: the real path of Verilator's verilated_std.sv;
    host code counts everywhere except inside the `std` package read from that file."""
    seen = _Seen()
    # node, enclosing scope, kind of that scope, inside Verilator's std package, enclosing PIN record
    stack = [(tree, "", "", False, None)]
    while stack:
        node, scope, kind_of_scope, in_std, pin = stack.pop()
        if isinstance(node, list):
            stack.extend((x, scope, kind_of_scope, in_std, pin) for x in node)
            continue
        if not isinstance(node, dict):
            continue
        kind = node.get("type")
        if kind in _SCOPES:
            scope, kind_of_scope = node.get("origName") or node.get("name") or "", kind
            if kind == "MODULE":
                seen.modules[node.get("addr", "")] = scope
            if kind == "PACKAGE" and scope == "std" and std_file and _file_of(node, files) == std_file:
                in_std = True
        elif kind == "VAR":
            addr = node.get("addr", "")
            seen.directions[addr], seen.names[addr] = node.get("direction", "NONE"), node.get("name", "")
            if kind_of_scope == "IFACE":
                seen.iface_vars.add(addr)
            elif node.get("varType") == "IFACEREF":
                seen.handles[addr] = scope
            else:
                seen.owner[addr] = scope
        elif kind in ("TASK", "FUNC"):
            seen.subs[node.get("addr", "")] = (kind_of_scope, scope)
            if node.get("dpiImport") or node.get("dpiExport"):
                seen.host.append((scope, f"DPI {'import' if node.get('dpiImport') else 'export'}",
                                  _where(node, files)))
        elif kind in ("TASKREF", "FUNCREF"):
            seen.calls.append((scope, node.get("taskp", ""), str(node.get("name", "")), node.get("dotted") or "",
                               _where(node, files)))
        elif kind == "CELL":
            seen.cells.append((scope, str(node.get("name", "")), _where(node, files)))
            seen.cell_modules.append((scope, str(node.get("name", "")), node.get("modp", "")))
            stack.extend((v, scope, kind_of_scope, in_std, (node.get("modp", ""),)) for v in node.values()
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
            if kind == "VARXREF":
                seen.xrefs.append((scope, var, name, _where(node, files)))
            if node.get("access") in ("WR", "RW"):
                seen.writes.append((scope, var, name, _where(node, files), pin if isinstance(pin, list) else None))
        stack.extend((v, scope, kind_of_scope, in_std, pin) for v in node.values() if isinstance(v, (dict, list)))
    return seen


def _file_of(node: dict, files: dict) -> str:
    letter = str(node.get("loc", "")).partition(",")[0]
    return files.get(letter, {}).get("realpath", "")


def _where(node: dict, files: dict) -> str:
    loc = str(node.get("loc", ""))
    letter, _, span = loc.partition(",")
    name = files.get(letter, {}).get("filename", letter)
    return f"{name}:{span.split(':')[0]}" if span else name
