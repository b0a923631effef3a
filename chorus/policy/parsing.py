"""Completion parsing: find the stimulus in what a model wrote. Never raises; every result
carries a status, so a bad completion is scored (as missing code) rather than crashing a run.

Order of preference: the first fenced block whose language tag fits the format; else the
first fenced block of any language; else, for SystemVerilog formats, `module ... endmodule`;
else, for data formats, the bare text. A fence that opens and never closes is `truncated`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

LANGUAGES = {
    "testbench": {"verilog", "systemverilog", "sv", "v", "svh"},
    "body": {"verilog", "systemverilog", "sv", "v"},
    "vectors": {"vectors", "vec", "text", "txt", "plaintext"},
    "cocotb": {"python", "py", "python3"},
}
PARSE_STATUSES = ("ok", "wrong_language", "unfenced", "truncated", "no_code")

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.#-]*)[^\n]*\n", re.M)
_FILENAME = re.compile(r"^\W*file\s*name\W*[:=]\W*\s*([\w./-]+\.\w+)", re.I | re.M)
_MODULE = re.compile(r"\bmodule\b.*?\bendmodule\b", re.S)


@dataclass(frozen=True)
class Parsed:
    code: str | None
    status: str  # one of PARSE_STATUSES
    filename: str | None = None
    language: str | None = None

    @property
    def ok(self) -> bool:
        return self.code is not None and self.status in ("ok", "wrong_language", "unfenced")


def _blocks(text: str) -> list[tuple[str, str, bool, int]]:
    """(language, body, closed, start offset) for each fenced block, in order."""
    out, pos = [], 0
    while (m := _FENCE.search(text, pos)) is not None:
        fence, lang = m.group(1), m.group(2).lower()
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.M)
        end = close.search(text, m.end())
        if end is None:
            out.append((lang, text[m.end():], False, m.start()))
            break
        out.append((lang, text[m.end():end.start()], True, m.start()))
        pos = end.end()
    return out


def parse_completion(text: str | None, fmt: str = "testbench") -> Parsed:
    text = (text or "").replace("\r\n", "\n")
    wanted = LANGUAGES.get(fmt, set())
    blocks = _blocks(text)
    chosen = next((b for b in blocks if b[0] in wanted), None)
    status = "ok"
    if chosen is None and blocks:
        chosen = blocks[0]
        status = "ok" if chosen[0] == "" else "wrong_language"
    if chosen is not None:
        lang, body, closed, start = chosen
        name = _FILENAME.findall(text[:start])
        filename = name[-1] if name else None
        if not closed:
            return Parsed(body if body.strip() else None, "truncated", filename, lang or None)
        if not body.strip():
            return Parsed(None, "no_code", filename, lang or None)
        return Parsed(body.rstrip() + "\n", status, filename, lang or None)
    name = _FILENAME.findall(text)
    filename = name[0] if name else None
    if fmt in ("testbench",):
        m = _MODULE.search(text)
        if m:
            return Parsed(m.group(0) + "\n", "unfenced", filename, None)
        if re.search(r"\bmodule\b", text):
            return Parsed(None, "truncated", filename, None)
        return Parsed(None, "no_code", filename, None)
    stripped = _FILENAME.sub("", text).strip()
    return Parsed(stripped + "\n", "unfenced", filename, None) if stripped else Parsed(None, "no_code", filename)
