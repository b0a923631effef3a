"""Does the testbench reach the DUT other than through its ports? Decided on one walk of Verilator's
linked parse tree (verilator_ast.walk), so every reference is to what Verilator resolved it to,
however it was spelt: a macro, an escaped name, `$root`, an upward path, a handle.

Testbench code is code whose scope is not a design unit. The DUT's state is every variable a
design module, package or interface declares at its top level (static class members too; not a
subroutine's locals, not one object's members). Refused, each with the line and the name:
1. a write to DUT state, or to a testbench module's own input port (after inlining an input is
   the net it is connected to, which may be the DUT's own output register);
2. a call of a design module's task or function, or of any design subroutine that writes DUT state
   (directly or through the subroutines it calls): a package function setting a mode the DUT reads,
   an interface task driving a signal the DUT drives. A pure function of a design module is allowed
   (`uut.f(i)` to compute an expected value): a function that references no variable but its own
   arguments, locals and the design's parameters, and calls only such functions. Measured on a decoder whose case lives in
   its function, calling it over every input from the testbench left the DUT's coverage at 23.8 %
   while driving the same inputs through its port raised it to 52.4 %;
3. any reference to an interface instance a design module declares (a virtual interface handle or
   an interface-port actual would let later writes reach it without a name);
4. a write to an interface signal through a path that enters a DUT instance, or to a signal the
   DUT drives, in any interface instance but the testbench's private ones (never handed to a cell,
   a handle or a port);
5. a second driver on a testbench net that a DUT output port drives: a procedural or continuous
   write, an initial value, or another cell's output or inout. An initial value stays refused
   (`logic [3:0] q = 4'd9;` beside `cnt uut(.q(q))`): after inlining the net is the DUT's own output
   register, so the value is that register's start; measured on the counter it raised the DUT's
   toggle coverage from 2/8 to 3/8 (overall 68.3 % to 72.5 %), while on an output a continuous
   assignment drives (`top`) the DUT's drive overrode it and coverage was unchanged. An initial value
   on a testbench net no DUT output drives (`logic [3:0] a = 0;`, an input) is the testbench's own;
6. a testbench instance of an interface type the DUT also instantiates inside itself: Verilator
   keeps one set of coverage counters per interface type (interfaces are not inlined), so the
   testbench's activity would be counted as the DUT's, and the DUT's as the testbench's.
Reads of DUT internals stay allowed (white-box checks).
"""
from __future__ import annotations

from .verilator_tree import Seen


def breach(seen: Seen, design_units: set[str]) -> str | None:
    """Why testbench code reaches the DUT other than through its ports, or None."""
    tb = lambda scope: scope not in design_units  # noqa: E731
    design_modules = {a for a, n in seen.modules.items() if n in design_units and seen.kinds.get(n) == "MODULE"}
    dut_cells = {name for scope, name, modp, _ in seen.cells if modp in design_modules and tb(scope)}

    def through_dut(dotted: str) -> bool:
        return any(part.split("[")[0] in dut_cells for part in dotted.split(".")) if dotted else False

    # the interface signals design modules drive (through a port or their own instance)
    driven = {w[1] for w in seen.writes if not tb(w[0]) and seen.kinds.get(w[0]) == "MODULE"
              and w[1] in seen.iface_vars}
    state = {v for v in seen.state if seen.owner.get(v) in design_units} | driven
    private = _private_instances(seen, tb, design_modules)
    is_private = lambda scope, dotted: (scope, dotted.split(".")[0].split("[")[0]) in private  # noqa: E731

    for why in (_shared_counters(seen, tb, design_modules),
                _calls(seen, design_units, tb, state, through_dut, is_private),
                _handles(seen, tb),
                _writes(seen, tb, state, driven, design_modules, through_dut, is_private)):
        if why:
            return why
    return None


def _private_instances(seen: Seen, tb, design_modules: set) -> set:
    """(scope, name) of the testbench's interface instances that cannot reach the DUT: never named
    by a handle, a port actual of a DUT cell, or a port actual of a testbench cell whose module
    contains a DUT or passes its interface ports on (a reference model, a second agent). A virtual
    interface or an interface port is never private: what it points at is not known here."""
    iface_cells = {(scope, name) for scope, name, modp, _ in seen.cells
                   if tb(scope) and seen.kinds.get(seen.modules.get(modp, "")) == "IFACE"}
    cells_in = {}  # module name -> [cell's module address]
    for scope, _, modp, _ in seen.cells:
        cells_in.setdefault(scope, []).append(modp)
    own_cells = {(scope, name) for scope, name, _, _ in seen.cells}
    passes_ports = {pin[0] for pin in seen.pins for var, _ in pin[3]
                    if var in seen.handles and (seen.handles[var], seen.names[var]) not in own_cells}
    leaves = {name for name in cells_in.keys() | set(seen.modules.values())
              if not any(m in design_modules for m in cells_in.get(name, ())) and name not in passes_ports}
    pin_refs: dict = {}
    for scope, modp, _, refs in seen.pins:
        for var, _ in refs:
            if var in seen.handles:
                ok = tb(seen.modules.get(modp, "")) and seen.modules.get(modp, "") in leaves
                pin_refs.setdefault(var, []).append(ok)
    all_refs: dict = {}
    for _, var, _, _ in seen.refs:
        if var in seen.handles:
            all_refs[var] = all_refs.get(var, 0) + 1
    private = set()
    for var, owner in seen.handles.items():
        key = (owner, seen.names[var])
        if key in iface_cells and all_refs.get(var, 0) == len(pin_refs.get(var, [])) and all(pin_refs.get(var, [])):
            private.add(key)
    # an interface port of a testbench module is private when every instance of that module binds it
    # to a private instance (the reference model's port)
    for var, owner in seen.handles.items():
        if (owner, seen.names[var]) in own_cells or not tb(owner):
            continue
        actuals = [(pin[0], seen.names[v]) for pin in seen.pins if pin[2] == var for v, _ in pin[3]
                   if v in seen.handles]
        if actuals and all(a in private for a in actuals):
            private.add((owner, seen.names[var]))
    return private


def _shared_counters(seen: Seen, tb, design_modules: set) -> str | None:
    inside = {modp for scope, _, modp, _ in seen.cells if not tb(scope) and seen.kinds.get(scope) == "MODULE"
              and seen.kinds.get(seen.modules.get(modp, "")) == "IFACE"}
    # an instance the DUT's own interface port needs is allowed: the testbench has no other choice
    on_dut = {(pin[0], seen.names[var]) for pin in seen.pins if pin[1] in design_modules
              for var, _ in pin[3] if var in seen.handles}
    for scope, name, modp, where in seen.cells:
        if tb(scope) and modp in inside and (scope, name) not in on_dut:
            return (f"{where}: the testbench's interface instance {name} is of type {seen.modules[modp]}, which the DUT "
                    "instantiates inside itself; Verilator counts one interface type's coverage in one set of "
                    "counters, so its signals would count as the DUT's internals (declare an interface of your own)")
    return None


def _calls(seen: Seen, design_units: set[str], tb, state: set, through_dut, is_private) -> str | None:
    writers = _state_writers(seen, state)
    for scope, sub, name, dotted, where, _ in seen.calls:
        kind, owner = seen.subs.get(sub, ("", ""))
        if not tb(scope) or owner not in design_units:
            continue
        module_sub = kind == "MODULE" and not _pure(seen, sub, state)
        via_dut = kind == "IFACE" and through_dut(dotted)
        writes = sub in writers and not (kind == "IFACE" and is_private(scope, dotted))
        if module_sub or via_dut or writes:
            what = ("a subroutine of the DUT that is not a pure function (one referencing only its arguments, "
                    "locals and parameters)" if module_sub else "a subroutine of the DUT" if via_dut
                    else f"a subroutine of design unit {owner} that writes its state")
            return f"{where}: a call of {f'{dotted}.{name}'.lstrip('.')}, {what}, may write into the DUT's internals"
    return None


def _pure(seen: Seen, sub: str, state: set) -> bool:
    """A function that references only its own arguments, locals and parameters, and calls only such functions."""
    callees: dict[str, set] = {}
    for c in seen.calls:
        if c[5]:
            callees.setdefault(c[5], set()).add(c[1])
    todo, done = [sub], set()
    while todo:
        f = todo.pop()
        if f in done:
            continue
        done.add(f)
        if f not in seen.funcs or any((v in state and v not in seen.constants) or v in seen.handles
                                      or v in seen.iface_vars for v in seen.sub_refs.get(f, ())):
            return False
        todo.extend(callees.get(f, ()))
    return True


def _state_writers(seen: Seen, state: set) -> set:
    """Design subroutines that write DUT state, directly or through the subroutines they call."""
    writers = {w[5] for w in seen.writes if w[5] and w[1] in state}
    callers: dict[str, set] = {}
    for c in seen.calls:
        if c[5]:
            callers.setdefault(c[1], set()).add(c[5])
    frontier = list(writers)
    while frontier:
        for caller in callers.get(frontier.pop(), ()):
            if caller not in writers:
                writers.add(caller)
                frontier.append(caller)
    return writers


def _handles(seen: Seen, tb) -> str | None:
    for scope, var, name, where in seen.refs:
        owner = seen.handles.get(var)
        if owner is not None and tb(scope) and not tb(owner) and seen.kinds.get(owner) == "MODULE":
            return f"{where}: a reference to {name}, an interface instance inside the DUT, lets later writes " \
                   "reach the DUT's internals (a virtual interface or an interface port)"
    return None


def _writes(seen: Seen, tb, state: set, driven: set, design_modules: set, through_dut, is_private) -> str | None:
    driving = {}  # testbench variable -> (the DUT's output port name, the PIN record that drives it)
    for pin in seen.pins:
        scope, modp, port_var, refs = pin
        if tb(scope) and modp in design_modules and seen.directions.get(port_var) == "OUTPUT":
            for var, access in refs:
                if access in ("WR", "RW"):
                    driving.setdefault(var, (seen.names.get(port_var, "?"), id(pin)))
    for scope, var, name, where, pin, _ in seen.writes:
        if not tb(scope):
            continue
        path = name.rpartition(".")[0]
        if var in seen.iface_vars:
            if through_dut(path):
                return f"{where}: a write to {name} writes into the DUT's internals (an interface inside the DUT)"
            if var in driven and not (path and is_private(scope, path)):
                return f"{where}: a write to {name}, an interface signal the DUT drives, writes into the DUT's internals"
        elif var in state:
            return f"{where}: a write to {name} writes into the DUT's internals (found in Verilator's own parse)"
        elif seen.directions.get(var) == "INPUT" and var in seen.state and pin is None:
            return f"{where}: a write to input port {name}: an input is the net it is connected to, which may be " \
                   "the DUT's own variable, so writing it can write into the DUT's internals"
        if var in driving and driving[var][1] != id(pin):
            how = "a second driver (another cell's output)" if pin is not None else "a write"
            return f"{where}: {how} on {name}, which the DUT's output port {driving[var][0]} drives, " \
                   "writes into the DUT's internals (an initial value too: it would start the DUT's output " \
                   "register); only the DUT may drive its outputs"
    return None
