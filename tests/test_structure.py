"""The package's shape: imports between chorus's modules go one way (function-local imports count:
they are how a loop hides)."""
import ast
from pathlib import Path

import chorus

ROOT = Path(chorus.__file__).resolve().parent
# Loops that exist and are not yet broken; a new one fails the test, and so does fixing one of these
# without deleting it here.
KNOWN: set[frozenset] = set()


def _modules() -> dict[str, Path]:
    out = {}
    for f in ROOT.rglob("*.py"):
        parts = f.relative_to(ROOT.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _imports(name: str, path: Path, modules: dict) -> set[str]:
    """The chorus modules `name` imports anywhere in its body (a package when no submodule matches)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    deps = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            deps.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            for a in node.names:
                deps.add(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base)
    return {d for d in deps if d in modules and d != name}


def import_cycles() -> set[frozenset]:
    """Strongly connected groups of more than one module in chorus's import graph (Tarjan)."""
    modules = _modules()
    graph = {m: _imports(m, f, modules) for m, f in modules.items()}
    index, low, stack, found = {}, {}, [], set()

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while not group or v not in group:
                group.add(stack.pop())
            if len(group) > 1:
                found.add(frozenset(group))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_import_graph_has_no_new_loops():
    assert import_cycles() == KNOWN


def test_the_runtime_kit_does_not_import_the_builds_that_use_it():
    modules = _modules()
    assert "chorus.sim.build" not in _imports("chorus.sim.runtime", modules["chorus.sim.runtime"], modules)
    assert "chorus.sim.runtime" in _imports("chorus.sim.build", modules["chorus.sim.build"], modules)
