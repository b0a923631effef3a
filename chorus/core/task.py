"""The Task: one design to write stimulus for, and the coverage it must reach."""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable


TRUSTED = "trusted_rtl"  # meta key: set only by load_tasks(trusted=True), never read from a task file


class TaskFormatError(ValueError):
    """A task file or row is missing, malformed or incomplete; the message names the fix."""


@dataclass
class Task:
    id: str
    spec: str  # natural-language specification shown to the model
    rtl: dict[str, str]  # relative file name -> SystemVerilog source
    top: str  # DUT top module
    instance: str  # instance name the testbench must use (CVDP checks it)
    targets: dict[str, float] = field(default_factory=lambda: {"overall": 100.0})  # metric -> percent
    difficulty: str = "medium"
    source: str = "jsonl"
    family: str = ""
    split: str = ""
    defines: dict[str, str] = field(default_factory=dict)
    spec_files: dict[str, str] = field(default_factory=dict)  # extra docs (e.g. docs/spec.md)
    reference_tb: str | None = None
    tb_name: str = "tb.sv"
    # a compact spec: the facts stimulus depends on in a few lines; prompts that cannot hold the spec
    # carry it instead (generated tasks state it on the input aliases)
    brief: str = ""
    # the DUT's parameters as the task states them: name -> value (SystemVerilog text) or a list of
    # allowed values; any other value is refused (sim/dut_parameters.py). {}: the RTL's defaults.
    parameters: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    @property
    def stated_parameters(self) -> tuple[tuple[str, str], ...]:
        """The parameter values chorus's own harnesses instantiate the DUT with: each fixed value, or
        the first of an allowed list (sorted by name; empty: the RTL's defaults)."""
        return tuple((k, str(v[0] if isinstance(v, list) else v)) for k, v in sorted(self.parameters.items()))

    @property
    def target(self) -> float:
        return float(self.targets.get("overall", max(self.targets.values(), default=100.0)))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, where: str = "task") -> "Task":
        if not isinstance(d, dict):
            raise TaskFormatError(f"{where}: expected a JSON object, got {type(d).__name__}")
        missing = [k for k in ("id", "spec", "rtl", "top", "instance") if not d.get(k)]
        if missing:
            raise TaskFormatError(f"{where}: missing required field(s) {missing}")
        if not isinstance(d["rtl"], dict) or not all(isinstance(v, str) for v in d["rtl"].values()):
            raise TaskFormatError(f"{where}: 'rtl' must map file names to source text")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(d) - known)
        if unknown:
            raise TaskFormatError(f"{where}: unknown field(s) {unknown}")
        t = cls(**d)
        if isinstance(t.meta, dict):
            t.meta.pop(TRUSTED, None)
        if not isinstance(t.parameters, dict) or not all(
                isinstance(v, (str, int)) or (isinstance(v, list) and v and all(isinstance(x, (str, int)) for x in v))
                for v in t.parameters.values()):
            raise TaskFormatError(f"{where}: 'parameters' must map parameter names to a value or a list of allowed values")
        try:
            t.targets = {str(k): float(v) for k, v in t.targets.items()}
        except (TypeError, ValueError, AttributeError):
            raise TaskFormatError(f"{where}: 'targets' must map metric names to percentages") from None
        return t


def write_jsonl(tasks: Iterable[Task], path: Path) -> Path:
    """The task file, written whole or not at all (a temporary file renamed over it): a killed
    writer never leaves half a file that reads as a finished one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        for t in tasks:
            f.write(json.dumps(t.to_dict()) + "\n")
    tmp.replace(path)
    return path


def iter_jsonl(path: Path, hint: str = "tasks.path=<file.jsonl>"):
    """Yield (where, row) for each non-empty line; a bad line is a one-line TaskFormatError."""
    path = Path(path)
    if not path.is_file():
        raise TaskFormatError(f"task file {path} does not exist; pass {hint}")
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise TaskFormatError(f"{path}:{n}: not valid UTF-8 at byte {exc.start} of the line; "
                                      "re-encode the file as UTF-8") from None
            if not line.strip():
                continue
            try:
                yield f"{path}:{n}", json.loads(line)
            except (json.JSONDecodeError, RecursionError) as exc:
                why = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
                raise TaskFormatError(f"{path}:{n}: not valid JSON ({why})") from None


def read_jsonl(path: Path) -> list[Task]:
    tasks = [Task.from_dict(row, where=where) for where, row in iter_jsonl(path)]
    if not tasks:
        raise TaskFormatError(f"{path} holds no tasks")
    return tasks
