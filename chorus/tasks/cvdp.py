"""Loader for the official CVDP row format (the same rows as the Hugging Face files).

Two row shapes exist: non-agentic (`input`/`output`/`harness.files`) and agentic
(`prompt`/`context`/`patch`/`harness` as a flat file map). A cid012 row maps to a Task:
RTL from the harness `src/*.sv|v` named by the xrun command, TARGET from `src/.env`, the
instance name that `src/process.py` checks, and `-define`s from the xrun command.
"""
from __future__ import annotations

import ast
import re
import shlex
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath

from ..core.task import Task, TaskFormatError, iter_jsonl
from ..sim.svlex import top_modules

_ENV_LINE = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*(.*?)\s*$")


def parse_env(text: str) -> dict[str, str]:
    return {m[1]: m[2] for line in text.splitlines() if (m := _ENV_LINE.match(line))}


def _xrun_command(process_py: str) -> str | None:
    m = re.search(r"(xrun\s[^\"'\n]*)", process_py)
    return m.group(1) if m else None


def instance_from_process(process_py: str, env: dict[str, str]) -> str | None:
    """The instance key process.py reads from IMC's report, resolved statically with ast."""
    try:
        tree = ast.parse(process_py)
    except SyntaxError:
        return None
    strings: dict[str, str] = {}

    def value(node) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return strings.get(node.id)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "getenv":
            args = [value(a) for a in node.args]
            if args and args[0]:
                return env.get(args[0], args[1] if len(args) > 1 else None)
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            v = value(node.value)
            if v is not None:
                strings[node.targets[0].id] = v
    for node in ast.walk(tree):  # metrics["uut"], metrics[dut], metrics[os.getenv("TOPLEVEL")]
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "metrics":
            v = value(node.slice)
            if v:
                return v
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "metrics" and node.args):
            v = value(node.args[0])
            if v:
                return v
    for node in ast.walk(tree):  # entry["name"] == top_module_name
        if isinstance(node, ast.Compare) and len(node.comparators) == 1:
            v = value(node.comparators[0])
            if v and isinstance(node.left, ast.Subscript) and value(node.left.slice) == "name":
                return v
    return None


def instance_from_testbench(tb: str, top: str) -> str | None:
    m = re.search(rf"\b{re.escape(top)}\s*(?:#\s*\((?:[^()]|\([^()]*\))*\)\s*)?([A-Za-z_]\w*)\s*\(", tb)
    return m.group(1) if m else None


def _row_parts(row: dict) -> tuple[str, dict, dict, dict]:
    """prompt, context files, harness files, expected-output files for either row shape."""
    if "input" in row:
        inp, out = row.get("input") or {}, row.get("output") or {}
        harness = (row.get("harness") or {}).get("files", {})
        return inp.get("prompt", ""), inp.get("context") or {}, harness, out.get("context") or {}
    return row.get("prompt", ""), row.get("context") or {}, row.get("harness") or {}, row.get("patch") or {}


_ASSIGNED = r"`?{name}`?\s*(?:=|\(\s*Default\s*=)\s*(\d+)\b"


def prompt_parameters(prompt: str, rtl: dict[str, str], top: str, defines: dict[str, str]) -> dict[str, list[str]]:
    """The parameter values a CVDP prompt asks the testbench to support (`ROW_A = 2`, "(Default=4)"):
    each parameter of the DUT the prompt assigns integers to -> its default and those values.
    CVDP scores coverage at whatever parameters the testbench picks, and some prompts ask for
    several configurations; chorus allows exactly the ones the task states (sim/dut_parameters.py)."""
    from ..sim.design import dut_parameters

    try:
        defaults = dut_parameters(tuple(sorted(rtl.items())), top, tuple(sorted(defines.items())))
    except Exception:  # noqa: BLE001 - a design pyslang cannot elaborate states nothing here
        return {}
    out = {}
    for name, default in defaults.items():
        values = re.findall(_ASSIGNED.format(name=re.escape(name)), prompt)
        if not default.lstrip("-").isdigit():
            continue
        listed = list(dict.fromkeys([default, *(str(int(v)) for v in values)]))
        if len(listed) > 1:
            out[name] = listed
    return out


def row_to_task(row: dict, where: str = "row") -> Task:
    if not isinstance(row, dict) or "id" not in row:
        raise TaskFormatError(f"{where}: not a CVDP row (no 'id')")
    prompt, context, harness, outputs = _row_parts(row)
    process = harness.get("src/process.py", "")
    env = parse_env(harness.get("src/.env", ""))
    cmd = _xrun_command(process) or "xrun /src/*.sv /code/verif/*.sv"
    tokens = shlex.split(cmd)
    patterns = [t for t in tokens if t.startswith("/src/")]
    src = {k: v for k, v in harness.items() if re.match(r"^src/[^/]+\.(sv|v|svh|vh)$", k)}
    chosen = {k: v for k, v in src.items() if any(fnmatch("/" + k, p) for p in patterns)} or \
        {k: v for k, v in src.items() if k.endswith((".sv", ".v"))}
    if not chosen:
        raise TaskFormatError(f"{where} ({row['id']}): no RTL files under src/ in the harness")
    rtl = {PurePosixPath(k).name: v for k, v in sorted(chosen.items())}
    defines = {}
    for i, t in enumerate(tokens):
        if t == "-define" and i + 1 < len(tokens):
            k, _, v = tokens[i + 1].partition("=")
            defines[k] = v
    tops = top_modules("\n".join(rtl.values()))
    mentioned = re.findall(r"`([A-Za-z_]\w*)`", prompt)
    top = next((m for m in mentioned if m in tops), tops[0] if tops else None)
    if top is None:
        raise TaskFormatError(f"{where} ({row['id']}): cannot find the DUT top module")
    tb_files = {k: v for k, v in context.items() if k.startswith("verif/") and k.endswith((".sv", ".v"))}
    reference = next(iter(tb_files.values()), None) or None
    instance = instance_from_process(process, env) or (instance_from_testbench(reference, top) if reference else None)
    categories = row.get("categories") or []
    target = env.get("TARGET")
    try:
        targets = {"overall": float(target)} if target else {}
    except ValueError:
        raise TaskFormatError(f"{where} ({row['id']}): TARGET {target!r} in src/.env is not a number") from None
    tb_name = next((PurePosixPath(k).name for k in outputs if k.endswith((".sv", ".v"))), "tb.sv")
    spec_files = {k: v for k, v in context.items() if k not in tb_files and not k.startswith(("rtl/", "src/"))}
    return Task(id=row["id"], spec=prompt, rtl=rtl, top=top, instance=instance or "uut",
                targets=targets or {"overall": 100.0},
                difficulty=categories[1] if len(categories) > 1 else "medium", source="cvdp",
                family=categories[0] if categories else "", split="test", defines=defines,
                spec_files=spec_files, reference_tb=reference, tb_name=tb_name,
                parameters=prompt_parameters(prompt, rtl, top, defines),
                meta={"instance_from": "process.py" if instance_from_process(process, env) else "default",
                      "has_target": bool(targets)})


def load_cvdp(path: str | Path, reference_dir: str | Path | None = None) -> list[Task]:
    tasks = [row_to_task(row, where) for where, row in iter_jsonl(Path(path), "tasks.path=<cvdp_*.jsonl>")]
    if not tasks:
        raise TaskFormatError(f"{path} holds no CVDP rows")
    if reference_dir:
        for t in tasks:
            ref = Path(reference_dir) / f"{t.id}.sv"
            if ref.is_file():
                t.reference_tb = ref.read_text(errors="replace")
    return tasks
