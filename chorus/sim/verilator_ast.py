"""The last word on safety: Verilator's own parse tree of the design and the testbench.

safety.py checks the preprocessed testbench with pyslang, which gives fast, well-worded answers;
but two lexers can disagree (Verilator ends an attribute `(* .. *)` at the first `*)`, even
inside a string, where pyslang sees one string literal). So before the build, Verilator itself
parses exactly what it will compile (`--json-only`, jailed) and chorus walks that tree:

- host code: $system/$c nodes (SYSTEMT, SYSTEMF, CSTMTUSER, CEXPRUSER), `systemc_* sections and
  DPI imports/exports, anywhere. In the testbench they are `rejected`; in the task's RTL they are
  a task error unless the tasks are trusted.
- writes into the design: every variable reference Verilator marks as written (access WR or RW)
  from code outside the design whose variable belongs to a design module or package, however it
  was spelt: force, assignment, a port or gate terminal, a task's output, a package or class call.
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
    return judge(tree, files, design_units, trusted_rtl, allow_dut_writes)


def judge(tree: dict, files: dict, design_units: set[str], trusted_rtl: bool,
          allow_dut_writes: bool = False) -> AstVerdict:
    """Walk the tree once, then decide: host code anywhere; writes from outside the design into
    a design variable; writes to a testbench net that a DUT output port drives (after inlining
    it is the same variable as the DUT's port, so writing it writes the DUT); and instance names
    with a dot or bracket, which would read as extra hierarchy levels in coverage paths.

    Variables of an interface are left out of the write check: a testbench drives a DUT with an
    interface port through the interface instance it owns."""
    seen = _walk(tree, files)
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
    driven = {}  # testbench variable -> the DUT output port driving it
    for scope, module, port_var, refs in seen.pins:
        if scope not in design_units and seen.modules.get(module) in design_units \
                and seen.directions.get(port_var) == "OUTPUT":
            driven.update({var: seen.names.get(port_var, "?") for var in refs})
    for scope, var, name, where, in_pin in seen.writes:
        if scope in design_units:
            continue
        if seen.owner.get(var) in design_units:
            return AstVerdict("rejected", f"{where}: a write to {name} writes into the DUT's internals (found in "
                              "Verilator's own parse); drive its ports instead (reading internals is fine; "
                              "simulator.allow_dut_writes=true permits it)")
        if var in driven and not in_pin:
            return AstVerdict("rejected", f"{where}: a write to {name}, which the DUT's output port "
                              f"{driven[var]} drives, writes into the DUT's internals; only the DUT may drive its "
                              "outputs (simulator.allow_dut_writes=true permits it)")
    return AstVerdict()


@dataclass
class _Seen:
    owner: dict = field(default_factory=dict)  # VAR address -> declaring scope (interfaces left out)
    directions: dict = field(default_factory=dict)  # VAR address -> INPUT | OUTPUT | INOUT | NONE
    names: dict = field(default_factory=dict)  # VAR address -> its name
    modules: dict = field(default_factory=dict)  # MODULE address -> its original name
    host: list = field(default_factory=list)  # (scope, what, where)
    writes: list = field(default_factory=list)  # (scope, var address, name, where, inside a design cell's pin)
    pins: list = field(default_factory=list)  # (scope, cell's module address, port VAR address, [var addresses])
    cells: list = field(default_factory=list)  # (scope, instance name, where)


def _walk(tree: dict, files: dict) -> _Seen:
    seen = _Seen()
    stack = [(tree, "", False, None)]  # node, enclosing scope, inside an interface, enclosing PIN record
    while stack:
        node, scope, interface, pin = stack.pop()
        if isinstance(node, list):
            stack.extend((x, scope, interface, pin) for x in node)
            continue
        if not isinstance(node, dict):
            continue
        kind = node.get("type")
        if kind in _SCOPES:
            scope = node.get("origName") or node.get("name") or ""
            interface = kind == "IFACE"
            if kind == "MODULE":
                seen.modules[node.get("addr", "")] = scope
        elif kind == "VAR":
            addr = node.get("addr", "")
            seen.directions[addr], seen.names[addr] = node.get("direction", "NONE"), node.get("name", "")
            if not interface:
                seen.owner[addr] = scope
        elif kind == "CELL":
            seen.cells.append((scope, str(node.get("name", "")), _where(node, files)))
            stack.extend((v, scope, interface, (node.get("modp", ""),)) for v in node.values()
                         if isinstance(v, (dict, list)))
            continue
        elif kind == "PIN" and pin is not None:
            pin = [scope, pin[0], node.get("modVarp", ""), []]
            seen.pins.append(pin)
        elif kind in HOST_NODES:
            seen.host.append((scope, HOST_NODES[kind], _where(node, files)))
        elif kind in ("TASK", "FUNC") and (node.get("dpiImport") or node.get("dpiExport")):
            seen.host.append((scope, f"DPI {'import' if node.get('dpiImport') else 'export'}", _where(node, files)))
        elif kind in ("VARREF", "VARXREF"):
            if isinstance(pin, list):
                pin[3].append(node.get("varp", ""))
            if node.get("access") in ("WR", "RW"):
                dotted = node.get("dotted") or ""
                seen.writes.append((scope, node.get("varp", ""), f"{dotted}.{node.get('name')}".lstrip("."),
                                    _where(node, files), isinstance(pin, list)))
        stack.extend((v, scope, interface, pin) for v in node.values() if isinstance(v, (dict, list)))
    return seen


def _where(node: dict, files: dict) -> str:
    loc = str(node.get("loc", ""))
    letter, _, span = loc.partition(",")
    name = files.get(letter, {}).get("filename", letter)
    return f"{name}:{span.split(':')[0]}" if span else name
