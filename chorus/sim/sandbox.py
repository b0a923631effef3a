"""Untrusted testbench handling: a static scan before any build, and resource-limited runs.

The scan works on a small SystemVerilog lexer (comments and strings understood), not on
regexes over raw text, so `// $system` in a comment is fine and `"$system"` in a string is
data. It rejects what could escape the working directory or run host code.
"""
from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

_TOKEN = re.compile(
    r"""(?P<comment>//[^\n]*|/\*.*?\*/)
      |(?P<string>"(?:[^"\\\n]|\\.)*")
      |(?P<directive>`[A-Za-z_][\w$]*)
      |(?P<systask>\$[A-Za-z_][\w$]*)
      |(?P<ident>[A-Za-z_][\w$]*)
      |(?P<punct>[()\[\];,=.#@])
      |(?P<other>\S)""",
    re.S | re.X,
)

# Host-code escapes: Verilator's $c family embeds raw C++.
_FORBIDDEN_TASKS = re.compile(r"^\$(system|c\d*|cpure|cstmt|cexpr)$")
# Tasks whose first argument names a file.
_FILE_TASKS = {"$fopen", "$readmemh", "$readmemb", "$writememh", "$writememb", "$dumpfile",
               "$fdumpfile", "$sdf_annotate", "$save", "$restart", "$incsave"}
_FORBIDDEN_DIRECTIVES = re.compile(r"^`(systemc_\w+|verilator_config|verilog)$")
_DESIGN_KEYWORDS = {"module", "macromodule", "interface", "package", "program", "primitive", "class"}


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    line: int


def tokenize(source: str) -> list[Token]:
    tokens, line, pos = [], 1, 0
    for m in _TOKEN.finditer(source):
        line += source.count("\n", pos, m.start())
        kind, text = m.lastgroup, m.group()
        if kind != "comment":
            tokens.append(Token(kind, text, line))
        line += text.count("\n")
        pos = m.end()
    return tokens


def _unsafe_path(literal: str) -> str | None:
    path = literal[1:-1]
    if not path.strip():
        return "an empty file name"
    if path.startswith(("/", "~", "\\")) or re.match(r"^[A-Za-z]:", path):
        return f"an absolute path {literal}"
    if ".." in re.split(r"[\\/]", path):
        return f"a path leaving the working directory {literal}"
    if "\\" in path or "\x00" in path:
        return f"an unusual file name {literal}"
    return None


def scan_testbench(source: str, protected_modules: set[str] = frozenset()) -> str | None:
    """Return why `source` must not be built, or None when it may be."""
    if not source or not source.strip():
        return "empty testbench"
    tokens = tokenize(source)
    for i, tok in enumerate(tokens):
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if tok.kind == "systask":
            if _FORBIDDEN_TASKS.match(tok.text):
                return f"line {tok.line}: {tok.text} is not allowed (host code or shell access)"
            if tok.text in _FILE_TASKS:
                arg = tokens[i + 2] if nxt and nxt.text == "(" and i + 2 < len(tokens) else None
                if arg is None or arg.kind != "string":
                    return f"line {tok.line}: {tok.text} needs a string-literal file name"
                bad = _unsafe_path(arg.text)
                if bad:
                    return f"line {tok.line}: {tok.text} with {bad}; use a file in the working directory"
        elif tok.kind == "directive":
            if _FORBIDDEN_DIRECTIVES.match(tok.text):
                return f"line {tok.line}: {tok.text} is not allowed"
            if tok.text == "`include":
                if nxt is None or nxt.kind != "string":
                    return f"line {tok.line}: `include needs a quoted relative file name"
                bad = _unsafe_path(nxt.text)
                if bad:
                    return f"line {tok.line}: `include with {bad}"
        elif tok.kind == "ident":
            if tok.text in ("import", "export") and nxt and nxt.kind == "string" and "DPI" in nxt.text:
                return f"line {tok.line}: DPI {tok.text} is not allowed"
            if tok.text == "bind":
                return f"line {tok.line}: bind is not allowed (it would add code inside the DUT)"
            if tok.text in _DESIGN_KEYWORDS and protected_modules:
                j = i + 1
                while j < len(tokens) and tokens[j].text in ("automatic", "static", "virtual"):
                    j += 1
                if j < len(tokens) and tokens[j].text in protected_modules:
                    return (f"line {tok.line}: the testbench redefines design unit '{tokens[j].text}'; "
                            "instantiate the RTL instead")
    return None


def rewrite_stop_as_finish(source: str) -> str:
    """`$stop` ends an xrun batch run; Verilator would ignore it below the error limit."""
    out, pos = [], 0
    for m in _TOKEN.finditer(source):
        if m.lastgroup == "systask" and m.group() == "$stop":
            out.append(source[pos:m.start()])
            out.append("$finish")
            pos = m.end()
    out.append(source[pos:])
    return "".join(out)


def top_modules(source: str) -> list[str]:
    """Modules declared in `source` that no other module in it instantiates."""
    tokens = tokenize(source)
    declared, used, name_at = [], set(), set()
    for i, tok in enumerate(tokens):
        if tok.kind == "ident" and tok.text in ("module", "macromodule", "program"):
            j = i + 1
            while j < len(tokens) and tokens[j].text in ("automatic", "static"):
                j += 1
            if j < len(tokens) and tokens[j].kind == "ident":
                declared.append(tokens[j].text)
                name_at.add(j)
        elif tok.kind == "ident" and i not in name_at and i + 2 < len(tokens):
            # `Mod #(...) inst (` or `Mod inst (` / `Mod inst [N] (`, not an end label `: Mod`
            if i > 0 and tokens[i - 1].text in (":", "."):
                continue
            nxt, nxt2 = tokens[i + 1], tokens[i + 2]
            if nxt.text == "#" or (nxt.kind == "ident" and nxt2.text in ("(", "[")):
                used.add(tok.text)
    return [m for m in declared if m not in used]


@dataclass
class RunOutcome:
    returncode: int | None
    timed_out: bool
    seconds: float
    log: str


def run_limited(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float, log_path: Path,
                mem_mb: int, file_mb: int, cpu_s: float | None = None) -> RunOutcome:
    """Run `cmd` in its own process group with rlimits; kill the whole group on timeout."""

    def limits() -> None:
        os.setsid()
        mem = mem_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        fsz = file_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsz, fsz))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        cpu = int(cpu_s or timeout_s * 2 + 5)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))

    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, preexec_fn=limits)
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
    return RunOutcome(proc.returncode if not timed_out else None, timed_out,
                      time.monotonic() - start, trim_log(log_path))


def trim_log(path: Path, head: int = 6000, tail: int = 6000) -> str:
    """First and last few KB of a log: enough to diagnose, never gigabytes."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            if size <= head + tail:
                return f.read().decode("utf-8", "replace")
            first = f.read(head)
            f.seek(size - tail)
            last = f.read()
    except OSError:
        return ""
    skipped = size - head - tail
    return (first.decode("utf-8", "replace") + f"\n... [{skipped} bytes trimmed] ...\n"
            + last.decode("utf-8", "replace"))
