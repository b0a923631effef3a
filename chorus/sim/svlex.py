"""A small SystemVerilog lexer: enough to tell code from comments and strings.

Used for the testbench safety scan and to find top-level modules; full parsing is pyslang's job.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

TOKEN = re.compile(
    r"""(?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))
      |(?P<string>"(?:[^"\\\n]|\\.)*")
      |(?P<directive>`[A-Za-z_][\w$]*)
      |(?P<systask>\$[A-Za-z_][\w$]*)
      |(?P<ident>[A-Za-z_][\w$]*)
      |(?P<punct>[()\[\];,=.#@])
      |(?P<other>\S)""",
    re.S | re.X,
)


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    line: int


def tokenize(source: str) -> list[Token]:
    tokens, line, pos = [], 1, 0
    for m in TOKEN.finditer(source):
        line += source.count("\n", pos, m.start())
        kind, text = m.lastgroup, m.group()
        if kind != "comment":
            tokens.append(Token(kind, text, line))
        line += text.count("\n")
        pos = m.end()
    return tokens


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
