"""The ast check a cocotb stimulus module must pass before it runs (see the package docstring).

A fast first filter with clear answers; not the security boundary. The stimulus runs in its
own locked-down process (child/), so an escape from these rules still cannot touch the run's
coverage or files.
"""
from __future__ import annotations

import ast
import importlib
import string
import types

from ...sim.result import SimResult
from ..aliases import ALIAS_NAME, AliasMap
from .child.api import API

STIMULUS_FILE = "stimulus.py"
MAX_CHARS = 200_000
_ROOTS = ("cocotb", "random", "math")
COCOTB_MODULES = {"cocotb", "cocotb.triggers", "cocotb.clock", "cocotb.types", "cocotb.handle", "cocotb.utils",
                  "cocotb.queue", "cocotb.task", "cocotb.result", "cocotb.simtime"}
_BANNED = {"__import__", "exec", "eval", "compile", "open", "input", "breakpoint", "globals", "locals", "vars",
           "getattr", "setattr", "delattr", "hasattr", "dir", "type", "object", "super", "memoryview", "help",
           "exit", "quit", "classmethod", "staticmethod", "property", "BaseException", "SystemExit",
           "KeyboardInterrupt", "GeneratorExit"}
# Public attributes that lead from a coroutine, generator or traceback to frames and globals.
_FRAME_ATTRS = {"gi_frame", "gi_code", "cr_frame", "cr_code", "cr_await", "gi_yieldfrom", "ag_frame", "ag_code",
                "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "tb_frame", "tb_next", "co_consts",
                "get_coro", "mro"}


class _Problem(Exception):
    pass


def check_stimulus(text: str, amap: AliasMap) -> SimResult | None:
    """rejected / compile_error / empty for modules that must not run; None when it may run."""
    if len(text) > MAX_CHARS:
        return SimResult("rejected", f"the stimulus module is longer than {MAX_CHARS} characters")
    if "\0" in text:  # Python's parser refuses it without a line number
        line = text.count("\n", 0, text.index("\0")) + 1
        return SimResult("compile_error", f"line {line}: a NUL byte (\\x00) is not allowed in Python source")
    try:
        tree = ast.parse(text, STIMULUS_FILE)
    except SyntaxError as exc:
        return SimResult("compile_error", f"line {exc.lineno}: syntax error: {exc.msg}")
    try:
        drives = _Checker(amap).run(tree)
    except _Problem as p:
        return SimResult(*p.args)
    if not drives:
        return SimResult("empty", "the stimulus never assigns dut.<input>.value; nothing was simulated")
    return None


class _Checker:
    def __init__(self, amap: AliasMap):
        self.known = {a.alias for a in amap.all} | {"clk"}
        self.drivable = set(amap.drivable)
        self.bound: dict[str, object] = {}  # names bound by imports -> the real objects
        self.parents: dict[ast.AST, ast.AST] = {}

    @staticmethod
    def fail(node: ast.AST, status: str, what: str):
        raise _Problem(status, f"line {getattr(node, 'lineno', '?')}: {what}")

    def run(self, tree: ast.Module) -> bool:
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.imports(node)
        drives = [self.visit(node) for node in ast.walk(tree)]
        if not any(isinstance(n, ast.AsyncFunctionDef) and (n.name.startswith("stimulus") or n.decorator_list)
                   for n in tree.body):
            raise _Problem("compile_error", "no stimulus function: define `async def stimulus(dut):` at top level")
        return "exact" in drives or ("write" in drives and "alias" in drives)

    def imports(self, node: ast.Import | ast.ImportFrom):
        if isinstance(node, ast.Import):
            for a in node.names:
                self.module(node, a.name)
                name = a.asname or a.name.split(".")[0]
                self.bound[name] = self.module(node, a.name if a.asname else name)
            return
        mod = node.module or ""
        if node.level:
            self.fail(node, "rejected", "relative imports are not allowed (only cocotb, random, math)")
        base = self.module(node, mod)
        for a in node.names:
            if a.name == "*":
                self.fail(node, "rejected", "`import *` is not allowed; name what you import")
            obj = getattr(base, a.name, None)
            obj = self.module(node, f"{mod}.{a.name}") if obj is None else obj
            self.check_object(node, obj, f"{mod}.{a.name}")
            self.check_api(node, mod, a.name)
            self.bound[a.asname or a.name] = obj

    def module(self, node: ast.AST, name: str):
        if name.split(".")[0] not in _ROOTS:
            self.fail(node, "rejected", f"import of {name!r} is not allowed (only cocotb, random, math)")
        if name.startswith("cocotb") and name not in COCOTB_MODULES:
            self.fail(node, "rejected", f"module {name!r} is not allowed; use {', '.join(sorted(COCOTB_MODULES))}")
        try:
            return importlib.import_module(name)
        except ImportError:
            self.fail(node, "compile_error", f"no module named {name!r}")

    def check_object(self, node: ast.AST, obj, what: str):
        if isinstance(obj, types.ModuleType) and obj.__name__ not in COCOTB_MODULES | {"random", "math"}:
            self.fail(node, "rejected", f"{what} is not allowed (it is the module {obj.__name__!r})")
        if getattr(obj, "__qualname__", None) == "Clock" and getattr(obj, "__module__", "").startswith("cocotb"):
            self.fail(node, "rejected", "Clock: chorus starts the clock; the stimulus only awaits its edges")

    def check_name(self, node: ast.AST, name: str):
        if name in _BANNED:
            self.fail(node, "rejected", f"{name!r} is not allowed in stimulus")
        if name.startswith("_") and name != "_":
            self.fail(node, "rejected", f"name {name!r} is not allowed (names must not start with '_')")

    def visit(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.ClassDef):
            self.fail(node, "rejected", "class definitions are not allowed; write functions")
        if isinstance(node, ast.ExceptHandler) and node.type is None:
            self.fail(node, "rejected", "a bare `except:` is not allowed; name the exception (except ValueError:)")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.check_name(node, node.name)
            for d in node.decorator_list:
                if ast.unparse(d.func if isinstance(d, ast.Call) else d) not in ("cocotb.test", "test"):
                    self.fail(d, "rejected", "only @cocotb.test() may decorate a function")
        for name in getattr(node, "names", ()) if isinstance(node, (ast.Global, ast.Nonlocal)) else ():
            self.check_name(node, name)
        if isinstance(node, (ast.arg, ast.keyword)) and node.arg:
            self.check_name(node, node.arg)
        parent = self.parents.get(node)
        if isinstance(node, ast.Name):
            self.check_name(node, node.id)
            rooted = isinstance(parent, ast.Attribute) and parent.value is node
            if isinstance(self.bound.get(node.id), types.ModuleType) and not rooted:
                self.fail(node, "rejected", f"module {node.id!r} can only be used as {node.id}.<name>")
            if node.id in self.bound and rooted:
                self.resolve(node)
        if not isinstance(node, ast.Attribute):
            return None
        if node.attr.startswith("_") or node.attr in _FRAME_ATTRS:
            self.fail(node, "rejected", f"attribute {node.attr!r} is not allowed")
        if node.attr in ("format", "format_map"):
            self.check_format(node)
        if ALIAS_NAME.match(node.attr) and node.attr not in self.known:
            self.fail(node, "compile_error",
                      f"unknown alias {node.attr!r}; this design has {', '.join(sorted(self.known))}")
        writes = (node.attr == "value" and isinstance(node.ctx, ast.Store)) or (
            node.attr in ("set", "setimmediatevalue") and isinstance(parent, ast.Call) and parent.func is node)
        if not writes:
            return "alias" if node.attr in self.drivable else None
        base = node.value
        if not (isinstance(base, ast.Attribute) and base.attr in self.known):
            return "write"  # through a variable holding a handle: counted when an alias is named too
        if base.attr == "clk":
            self.fail(node, "compile_error", "clk is driven by chorus; the stimulus only awaits its edges")
        if base.attr not in self.drivable:
            self.fail(node, "compile_error",
                      f"{base.attr} is an output; stimulus can drive {', '.join(sorted(self.drivable)) or 'nothing'}")
        return "exact"

    def resolve(self, name_node: ast.Name):
        """Follow name.attr.attr on the real objects: no step may reach a module outside the allowed set,
        a name the stimulus process does not provide, or a module that is then kept rather than used."""
        obj, node, path = self.bound[name_node.id], self.parents[name_node], name_node.id
        while isinstance(node, ast.Attribute) and obj is not None:
            owner = obj.__name__ if isinstance(obj, types.ModuleType) else None
            path += "." + node.attr
            obj = getattr(obj, node.attr, None)
            self.check_object(node, obj, path)
            self.check_api(node, owner, node.attr)
            parent = self.parents.get(node)
            if isinstance(obj, types.ModuleType) and not (isinstance(parent, ast.Attribute) and parent.value is node):
                self.fail(node, "rejected", f"module {path!r} can only be used as {path}.<name>")
            node = parent

    def check_api(self, node: ast.AST, module: str | None, name: str):
        if module in API and name not in API[module] and f"{module}.{name}" not in API:
            offer = ", ".join(API[module]) or "nothing"
            self.fail(node, "compile_error", f"{module}.{name} is not available to stimulus; {module} offers {offer}")

    def check_format(self, node: ast.Attribute):
        """str.format looks up attributes and items itself ("{0.__class__}"): only plain fields on a literal."""
        def plain(fmt: str, depth: int = 0) -> bool:
            try:
                fields = list(string.Formatter().parse(fmt))
            except ValueError:
                return False
            # a field is a position or a name; no '.attr' or '[key]' after it, nor in a nested spec
            return depth < 2 and all(not name or name.isidentifier() or name.isdigit() for _, name, _, _ in fields) \
                and all(plain(spec, depth + 1) for _, _, spec, _ in fields if spec)
        literal = isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        if node.attr == "format_map" or not literal or not plain(node.value.value):
            self.fail(node, "rejected", "str.format is only allowed on a string literal with plain fields "
                                        "('{}', '{0:x}', '{name}'); use an f-string")
