"""Untrusted testbench handling: the static scan that runs before any build.

The scan works on a small SystemVerilog lexer (comments and strings understood), not on
regexes over raw text, so `// $system` in a comment is fine and `"$system"` in a string is
data. It rejects what could escape the working directory or run host code.
"""
from __future__ import annotations

import re

from .svlex import TOKEN, tokenize

# Host-code escapes: Verilator's $c family embeds raw C++.
_FORBIDDEN_TASKS = re.compile(r"^\$(system|c\d*|cpure|cstmt|cexpr)$")
# Tasks whose first argument names a file.
_FILE_TASKS = {"$fopen", "$readmemh", "$readmemb", "$writememh", "$writememb", "$dumpfile",
               "$fdumpfile", "$sdf_annotate", "$save", "$restart", "$incsave"}
_FORBIDDEN_DIRECTIVES = re.compile(r"^`(systemc_\w+|verilator_config|verilog)$")
_DESIGN_KEYWORDS = {"module", "macromodule", "interface", "package", "program", "primitive", "class"}


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
    for m in TOKEN.finditer(source):
        if m.lastgroup == "systask" and m.group() == "$stop":
            out.append(source[pos:m.start()])
            out.append("$finish")
            pos = m.end()
    out.append(source[pos:])
    return "".join(out)
