"""A team's own designs as tasks: one design per subfolder of a folder (or one per top module found
among RTL files at the folder's root), read with an optional manifest and elaborated with pyslang.

A design folder holds its SystemVerilog/Verilog (.sv .v), headers (.svh .vh), docs (.md .txt .rst)
and an optional `chorus.yaml` (MANIFEST_KEYS). Anything else is refused: a .vhd or a DPI .c beside
the RTL would be silently left out of what is measured. Headers are inlined where they are
`include`d (from the including file's folder, then the manifest's include_dirs), so pyslang,
Verilator and the prompt all read the same text. Targets are not set here (tasks/measured_targets.py).
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..core.task import Task

MANIFEST = "chorus.yaml"
MANIFEST_KEYS = ("top", "files", "include_dirs", "defines", "parameters", "instance", "spec", "target")
RTL_SUFFIXES = (".sv", ".v")
HEADER_SUFFIXES = (".svh", ".vh")
DOC_SUFFIXES = (".md", ".txt", ".rst")
SPEC_NAMES = ("README.md", "readme.md", "spec.md", "SPEC.md", "README.txt", "spec.txt")
_INCLUDE = re.compile(r'^([ \t]*)`include[ \t]+"([^"\n]+)"[^\n]*$', re.M)
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
MAX_INCLUDE_DEPTH = 16


class DesignRefused(ValueError):
    """One design cannot become a task; the message names the design and the reason."""


@dataclass(frozen=True)
class DesignSource:
    name: str  # the task id
    folder: Path
    files: tuple[Path, ...]  # the RTL in compile order (headers are inlined, not listed)
    manifest: dict
    top: str | None = None  # a root-level design: the top it was found for


def find_designs(src: Path) -> tuple[list[DesignSource], list[tuple[str, str]]]:
    """The designs under `src` and the ones refused before elaboration: (name, reason)."""
    src = Path(src)
    if not src.is_dir():
        raise FileNotFoundError(f"{src} is not a folder: designs come from a folder with one design per subfolder")
    designs, refused = [], []
    if (src / MANIFEST).exists():  # the folder is one design
        folders = [src]
    else:
        folders = [d for d in sorted(src.iterdir()) if d.is_dir() and not d.name.startswith(".")]
        root_rtl = sorted(f for f in src.iterdir() if f.is_file() and f.suffix in RTL_SUFFIXES)
        if root_rtl:
            try:
                for top in elaborate(root_rtl, src, {}, {}).tops:
                    designs.append(DesignSource(top, src, tuple(root_rtl), {}, top))
            except DesignRefused as exc:
                refused.append((src.name, str(exc)))
    for folder in folders:
        try:
            designs.append(_design_source(folder))
        except DesignRefused as exc:
            refused.append((folder.name, str(exc)))
    return designs, refused


def _design_source(folder: Path) -> DesignSource:
    if not _NAME.match(folder.name):
        raise DesignRefused(f"the folder name {folder.name!r} is not a usable task id (letters, digits, _ . -)")
    manifest = read_manifest(folder)
    if manifest.get("files"):
        files = []
        for rel in manifest["files"]:
            f = folder / str(rel)
            if not f.resolve().is_relative_to(folder.resolve()):
                raise DesignRefused(f"{MANIFEST} lists {rel}, outside the design's folder; copy shared RTL into it "
                                    "(headers may come from anywhere through include_dirs)")
            if not f.is_file():
                raise DesignRefused(f"{MANIFEST} lists {rel}, which is not a file in the design's folder")
            if f.suffix not in RTL_SUFFIXES + HEADER_SUFFIXES:
                raise DesignRefused(f"{MANIFEST} lists {rel}, which is not SystemVerilog/Verilog (.sv .v)")
            files.append(f)
        return DesignSource(folder.name, folder, tuple(f for f in files if f.suffix in RTL_SUFFIXES), manifest)
    files = []
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = f.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts) or rel.as_posix() == MANIFEST:
            continue
        if f.suffix in RTL_SUFFIXES:
            files.append(f)
        elif f.suffix not in HEADER_SUFFIXES + DOC_SUFFIXES:
            raise DesignRefused(f"holds {rel}, which is not SystemVerilog/Verilog RTL, a header or a doc; remove "
                                f"it, or list the RTL in {MANIFEST} (files: [...]) to leave other files out")
    if not files:
        raise DesignRefused("holds no SystemVerilog/Verilog file (.sv .v)")
    return DesignSource(folder.name, folder, tuple(files), manifest)


def read_manifest(folder: Path) -> dict:
    path = folder / MANIFEST
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise DesignRefused(f"{MANIFEST} is not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise DesignRefused(f"{MANIFEST} must be a mapping of {', '.join(MANIFEST_KEYS)}")
    unknown = sorted(set(data) - set(MANIFEST_KEYS))
    if unknown:
        raise DesignRefused(f"{MANIFEST} has unknown key(s) {unknown}; use {', '.join(MANIFEST_KEYS)}")
    for key in ("defines", "parameters"):
        if not isinstance(data.get(key) or {}, dict):
            raise DesignRefused(f"{MANIFEST}: {key} must map names to values")
    for key in ("files", "include_dirs"):
        if not isinstance(data.get(key) or [], list):
            raise DesignRefused(f"{MANIFEST}: {key} must be a list of paths")
    if data.get("target") is not None and not (isinstance(data["target"], (int, float)) and 0 < data["target"] <= 100):
        raise DesignRefused(f"{MANIFEST}: target must be a coverage percentage in (0, 100], got {data['target']!r}")
    return data


def inline_includes(path: Path, include_dirs: list[Path], depth: int = 0) -> str:
    """The file's text with each `include of a header found (beside it, then in include_dirs)
    replaced by the header's text; an include not found stays, for elaboration to report."""
    text = _read(path)
    if depth > MAX_INCLUDE_DEPTH:
        raise DesignRefused(f"`include nests deeper than {MAX_INCLUDE_DEPTH} levels at {path.name} (a cycle?)")

    def expand(m: re.Match) -> str:
        for d in (path.parent, *include_dirs):
            if (d / m[2]).is_file():
                return inline_includes(d / m[2], include_dirs, depth + 1).rstrip("\n")
        return m[0]

    return _INCLUDE.sub(expand, text)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except UnicodeDecodeError:
        raise DesignRefused(f"{path.name} is not UTF-8 text") from None


@dataclass(frozen=True)
class Elaborated:
    tops: tuple[str, ...]
    modules: frozenset[str]
    parameters: dict  # the top's parameters as elaborated (only with `top`)


def elaborate(files: list[Path] | tuple[Path, ...], folder: Path, defines: dict, parameters: dict,
              top: str | None = None, texts: dict[str, str] | None = None) -> Elaborated:
    """Elaborate with pyslang; the first error is a refusal. `texts`: the files' (inlined) text by name."""
    from pyslang import Bag, DiagnosticEngine
    from pyslang import ast as slang_ast
    from pyslang import syntax

    options = slang_ast.CompilationOptions()
    options.paramOverrides = [f"{k}={v}" for k, v in parameters.items()]
    if top:
        options.topModules = {top}
    comp = slang_ast.Compilation(Bag([options]))
    prelude = "".join(f"`define {k} {v}\n" for k, v in defines.items())
    for f in files:
        name = f.relative_to(folder).as_posix()
        comp.addSyntaxTree(syntax.SyntaxTree.fromText(prelude + (texts or {}).get(name, _read(f)), name))
    root = comp.getRoot()
    errors = [d for d in comp.getAllDiagnostics() if d.isError()]
    if errors:
        report = DiagnosticEngine.reportAll(comp.sourceManager, errors[:1]).strip().splitlines()
        raise DesignRefused(f"does not elaborate: {report[0] if report else 'pyslang reported an error'}")
    tops = tuple(i.name for i in root.topInstances)
    modules = frozenset(d.name for d in comp.getDefinitions())
    params = {}
    if top and tops:
        inst = root.topInstances[0]
        params = {p.name: str(p.value) for p in inst.body.parameters
                  if type(p).__name__ == "ParameterSymbol" and not p.isLocalParam}
    return Elaborated(tops, modules, params)


def design_task(design: DesignSource, instance: str = "dut") -> Task:
    """The design as a Task with the default target (100 %) and split "" (ingest sets both)."""
    from ..sim.design import dut_ports

    m = design.manifest
    folder = design.folder
    include_dirs = [folder / str(d) for d in m.get("include_dirs") or []]
    for d in include_dirs:
        if not d.is_dir():
            raise DesignRefused(f"{MANIFEST}: include_dirs names {d.relative_to(folder)}, which is not a folder")
    rtl = {f.relative_to(folder).as_posix(): inline_includes(f, include_dirs) for f in design.files}
    defines = {str(k): str(v) for k, v in (m.get("defines") or {}).items()}
    parameters = {str(k): v if isinstance(v, (int, list)) else str(v) for k, v in (m.get("parameters") or {}).items()}
    top = design.top or m.get("top")
    found = elaborate(design.files, folder, defines, {}, texts=rtl)
    if top is None:
        if len(found.tops) > 1:
            raise DesignRefused(f"has several top modules ({', '.join(found.tops)}); name the DUT with top: in "
                                f"{MANIFEST}")
        if not found.tops:
            raise DesignRefused("has no top module")
        top = found.tops[0]
    elif top not in found.modules:
        raise DesignRefused(f"{MANIFEST} names top: {top}, which no file of the design declares")
    elaborated = elaborate(design.files, folder, defines,
                           {k: (v[0] if isinstance(v, list) else v) for k, v in parameters.items()}, top, rtl)
    unknown = sorted(set(parameters) - set(elaborated.parameters))
    if unknown:
        raise DesignRefused(f"{MANIFEST} sets parameter(s) {unknown}, which {top} does not have")
    stated = tuple((k, str(v[0] if isinstance(v, list) else v)) for k, v in sorted(parameters.items()))
    ports = dut_ports(tuple(sorted(rtl.items())), top, tuple(sorted(defines.items())), stated)
    if not ports:
        raise DesignRefused(f"{top} has no ports: there is nothing for stimulus to drive")
    spec, spec_name = _spec(folder, m, design.top is not None)
    content = hashlib.sha256(repr((sorted(rtl.items()), top, sorted(defines.items()), stated)).encode()).hexdigest()
    return Task(id=design.name, spec=spec or port_table(top, ports, elaborated.parameters), rtl=rtl, top=top,
                instance=str(m.get("instance") or instance), source="folder", family=design.name,
                defines=defines, parameters=parameters,
                meta={"design": {"folder": folder.name, "spec_file": spec_name, "content": content[:16],
                                 "parameters_elaborated": elaborated.parameters,
                                 **({"target": float(m["target"])} if m.get("target") is not None else {})}})


def _spec(folder: Path, manifest: dict, shared_root: bool) -> tuple[str, str | None]:
    """The design's spec text and file name: the manifest's, else a README/spec beside the RTL (not
    for designs found at a folder's root, whose README describes the folder)."""
    if manifest.get("spec"):
        path = folder / str(manifest["spec"])
        if not path.is_file():
            raise DesignRefused(f"{MANIFEST} names spec: {manifest['spec']}, which is not a file")
        return _read(path), path.name
    for name in () if shared_root else SPEC_NAMES:
        if (folder / name).is_file():
            return _read(folder / name), name
    return "", None


def port_table(top: str, ports, parameters: dict) -> str:
    """The ports (and parameters as elaborated) as a small Markdown table: the spec of a design
    that has no written one."""
    lines = [f"Module `{top}` ports:", "", "| port | direction | width | type |", "|---|---|---|---|"]
    lines += [f"| {p.name} | {p.direction} | {p.width} | {p.type} |" for p in ports]
    if parameters:
        lines += ["", "Parameters (fixed by the task): " + ", ".join(f"{k} = {v}" for k, v in parameters.items())]
    return "\n".join(lines)
