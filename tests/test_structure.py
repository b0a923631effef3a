"""The package's shape: imports between chorus's modules go one way (function-local imports count:
they are how a loop hides)."""
import ast
from pathlib import Path

import chorus

ROOT = Path(chorus.__file__).resolve().parent
# Loops that exist and are not yet broken; a new one fails the test, and so does fixing one of these
# without deleting it here.
KNOWN: set[frozenset] = set()

# The layer order, bottom to top (docs/reference/layout.md says why each sits where it does). A node is
# a package under chorus (`sim`) or a root module (`train`); "chorus" is the root __init__. A node may
# import itself and any node of a lower layer, nothing else: nodes that share a layer import none of
# each other, so the list is the whole order. Function-local imports count.
LAYERS: list[tuple[str, ...]] = [
    ("chorus", "core"),  # the root __init__; the Task and the enums
    ("tracking",),  # run records, run-dir tables, progress, timing
    ("sim",),
    ("stimulus",),  # formats and aliases over sim's runs
    ("tasks",),  # loaders and the generated world, whose reference programs are stimulus
    ("config", "scoring", "fsdp", "optimizer"),
    ("policy",),
    ("protocol", "memory_plan"),
    ("trainer_setup",),
    ("heldout",),
    ("rl",),
    ("sft",),
    ("merge",),
    ("opd",),
    ("analysis",),
    ("entry",),  # what the Hydra entry points share at the start of main
    ("train",),  # the train job, which the pipeline's plan and the sweep tools compose through
    ("workflow",),  # the pipeline's plan and step runner: steps are chorus.train commands
    ("evaluate", "analyze", "pipeline", "sweep_check", "ingest"),
    ("sweep",),
]
# Imports from a lower layer to a higher one that are allowed, each with its reason: (importer, imported)
# as module names, at most two. A fixed one fails test_each_exception_still_exists until deleted here.
EXCEPTIONS: dict[tuple[str, str], str] = {}


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


def _node(module: str) -> str:
    """The layer node of a chorus module: its first component under chorus, "chorus" for the root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _layer() -> dict[str, int]:
    return {node: i for i, layer in enumerate(LAYERS) for node in layer}


def upward_imports() -> set[tuple[str, str]]:
    """(importer, imported) module pairs whose imported node is not in a lower layer than the importer's
    (a node's imports of itself excepted); nodes without a layer are test_every_node_has_a_layer's."""
    modules, layer = _modules(), _layer()
    found = set()
    for m, f in modules.items():
        for d in _imports(m, f, modules):
            a, b = _node(m), _node(d)
            if a != b and a in layer and b in layer and layer[b] >= layer[a]:
                found.add((m, d))
    return found


def test_every_node_has_a_layer():
    nodes = {_node(m) for m in _modules()}
    placed = [node for layer in LAYERS for node in layer]
    assert len(placed) == len(set(placed)), "a node is in two layers"
    assert nodes - set(placed) == set(), "place each new package or root module in LAYERS (and in layout.md)"


def test_imports_go_down_the_layers():
    layer = _layer()
    wrong = sorted(f"{a} -> {b} (layer {layer[_node(a)]} -> {layer[_node(b)]})"
                   for a, b in upward_imports() - set(EXCEPTIONS))
    assert wrong == [], "imports that do not go down the layers (tests/test_structure.py LAYERS):\n" + "\n".join(wrong)


def test_each_exception_still_exists():
    assert len(EXCEPTIONS) <= 2
    assert set(EXCEPTIONS) - upward_imports() == set(), "an exception that no longer exists: delete it"
