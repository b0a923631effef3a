"""The link to the harness: one JSON object per line over stdin/stdout.

The stimulus sees stand-ins for the part of cocotb that stimulus uses (handles, triggers,
tasks, Logic/LogicArray; see api.API): writes are collected and sent with the next wait, awaits
become trigger specs the harness awaits on the real design.

  child -> harness  {"op": "hello", "isolation": {...}}          once, after lockdown
                    {"op": "read", "sigs": [alias], "writes": [[alias, value], ...]}
                    {"op": "wait", "specs": [spec, ...], "writes": [...]}
                    {"op": "done", "writes": [...]}  {"op": "error", "error": "...", "loading": bool}
                    {"op": "print", "print": "..."}  (any message may carry "print": the
                    text the stimulus printed since the last message, for the run log)
  harness -> child  config {"text", "seed", "builtins", "sigs": {alias: [width, drivable]},
                    "precision", "t"}; replies {"values": {alias: int | "01xz.."}} to a read,
                    {"fired": [spec index], "t": steps, "values": {...}} to a wait
  spec: ["rise" | "fall" | "edge", alias, n] (n > 1 only when it is the only spec: n edges),
        ["timer", absolute step], ["ro"], ["rw"], ["next"]
Values of every alias read once come with each wake-up, so reads need no round trip. The
harness trusts none of it: it masks values, drives only in*/rst/rst_n, bounds every message
and ends the run as the stimulus's runtime error on anything malformed.
"""
import json
import os

PRINT_CHUNK = 1 << 16


class _Link:
    def __init__(self):
        self.inp = open(0, "rb", closefd=False)
        self.text: list[str] = []
        self.size = 0

    def send(self, msg: dict) -> None:
        if self.text:
            msg["print"] = "".join(self.text)
            self.text, self.size = [], 0
        data = (json.dumps(msg) + "\n").encode()
        while data:
            data = data[os.write(1, data):]

    def recv(self) -> dict:
        line = self.inp.readline()
        if not line:
            os._exit(0)  # the harness is gone
        return json.loads(line)

    def write(self, s) -> int:  # sys.stdout and sys.stderr: print() output goes to the run log
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        self.text.append(s)
        self.size += len(s)
        if self.size >= PRINT_CHUNK:
            self.send({"op": "print"})
        return len(s)

    def flush(self) -> None:
        pass
