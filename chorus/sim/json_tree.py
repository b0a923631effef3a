"""Read JSON of any nesting depth: Verilator's `--json-only` tree of a design.

Python's json decoder (the C one and the pure-Python one alike) recurses once per nesting level, so
a 600-deep else-if chain in a task's RTL raised RecursionError, and every sample of the task was
blamed for it. The tree is read here with an explicit stack instead: no depth limit but memory.
The fast C decoder still reads each tree first (most trees are shallow); only a tree it refuses
for depth is read again here, scanning strings with the C scanner and the rest by regex.
"""
from __future__ import annotations

import json
import re
from json.decoder import scanstring

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_SPACE = re.compile(r"[ \t\n\r]*")
_LITERALS = {"true": True, "false": False, "null": None}


def loads(text: str):
    """Verilator's JSON, read without a nesting limit; raises ValueError (json.JSONDecodeError) on bad
    JSON. Verilator writes a non-ASCII byte of an escaped identifier's `verilogName` as an octal
    escape (`\\sig_\\303\\251`), which JSON has no such escape for; such a lone backslash is read as a
    literal one. It cannot change the structure: a quote in a name is always written `\\"`, an
    escape kept whole."""
    text = _ESCAPE.sub(lambda m: m.group(0) if m.group(1) else "\\\\", text)
    try:
        return json.loads(text)
    except RecursionError:
        return _iterative(text)


# One JSON string escape: a valid one (kept), or a lone backslash (group 1 empty)
_ESCAPE = re.compile(r'\\(["\\/bfnrt]|u[0-9a-fA-F]{4})?')


def _iterative(s: str):
    """One value from `s`, containers built on an explicit stack of (container, pending key)."""
    stack: list[list] = []  # [container, key awaiting its value (objects) or None]
    i = _SPACE.match(s, 0).end()
    root, have_root = None, False
    while True:
        i = _SPACE.match(s, i).end()
        if i >= len(s):
            raise json.JSONDecodeError("unexpected end of data", s, i)
        top = stack[-1] if stack else None
        c = s[i]
        if top is not None and isinstance(top[0], dict) and top[1] is None:
            # inside an object, expecting a key (or the end of an empty object)
            if c == "}" and not top[0]:
                i += 1
                value = stack.pop()[0]
            elif c == '"':
                key, i = scanstring(s, i + 1)
                i = _SPACE.match(s, i).end()
                if s[i:i + 1] != ":":
                    raise json.JSONDecodeError("expected ':'", s, i)
                top[1] = key
                i += 1
                continue
            else:
                raise json.JSONDecodeError("expected a key", s, i)
        elif c == "]" and top is not None and isinstance(top[0], list) and not top[0]:
            i += 1
            value = stack.pop()[0]
        elif c == "{":
            stack.append([{}, None])
            i += 1
            continue
        elif c == "[":
            stack.append([[], None])
            i += 1
            continue
        elif c == '"':
            value, i = scanstring(s, i + 1)
        elif (m := _NUMBER.match(s, i)) and m.end() > i:
            value = float(m.group()) if m.group(1) or m.group(2) else int(m.group())
            i = m.end()
        else:
            word = next((w for w in _LITERALS if s.startswith(w, i)), None)
            if word is None:
                raise json.JSONDecodeError("unexpected character", s, i)
            value, i = _LITERALS[word], i + len(word)
        # a complete value: hand it to its container, then close every container that ends here
        while True:
            if not stack:
                root, have_root = value, True
                break
            top = stack[-1]
            if isinstance(top[0], dict):
                top[0][top[1]] = value
                top[1] = None
            else:
                top[0].append(value)
            i = _SPACE.match(s, i).end()
            c = s[i:i + 1]
            if c == ",":
                i += 1
                if isinstance(top[0], dict):
                    i = _SPACE.match(s, i).end()
                    if s[i:i + 1] != '"':
                        raise json.JSONDecodeError("expected a key", s, i)
                break
            if c == ("}" if isinstance(top[0], dict) else "]"):
                i += 1
                value = stack.pop()[0]
                continue
            raise json.JSONDecodeError("expected ',' or the container's end", s, i)
        if have_root:
            if _SPACE.match(s, i).end() != len(s):
                raise json.JSONDecodeError("extra data", s, i)
            return root
