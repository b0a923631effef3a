"""The safety checks of one testbench, run in a child process under a time and memory budget.

Reading a hostile testbench is work the testbench chooses: 3.6 KB of macros expand to megabytes
that pyslang parses and chorus walks node by node (measured: 24 s of CPU in the scoring process),
and 1 KB of nested generate loops makes Verilator's `--json-only` tree of it hundreds of MB (several
seconds and ~500 MB to read and walk). So both readings run here, in a fresh Python process (never
a fork of the scoring process, which has threads) under `simulator.check_mem_mb` (address space it
may grow by after start-up) and the sample's Deadline: `simulator.check_timeout_s` of wall clock
(and as much CPU) for all of its checks together, from the preprocessor to the walk of Verilator's
tree; over either, the sample is charged with a one-line reason naming the setting, and only the
child dies.

- `review`: the pyslang part of simulate.checked_testbench (raw-text refusals, parse, the checks,
  top modules, $stop rewritten).
- `judge_tree`: Verilator's tree read (json_tree: no nesting limit) and judged (tree_verdict.judge),
  with the signatures of the DUT's instances (dut_parameters) for the parameter check.

Answers come back as JSON, never pickle: a child that a parser bug let the testbench take over
could otherwise run code in the scoring process. Each answer is cached in this process by the
content it was computed from (the key the caller gives), pathological ones included, so a repeated
sample costs nothing a second time.
"""
from __future__ import annotations

import hashlib
import json
import os
import resource
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import chorus

from .config import SimConfig
from .process import run_limited

CACHE_ENTRIES = 4096
_CACHE: OrderedDict[str, dict] = OrderedDict()
# The child's own start-up (Python, pyslang) is not the sample's: its budget starts after imports,
# and this ceiling only backs it up should the child fail to set its own limit.
_STARTUP_MB = 2048
_PACKAGE_ROOT = str(Path(chorus.__file__).resolve().parent.parent)


@dataclass(frozen=True)
class Deadline:
    """When the safety checks of one sample must be done: `timeout_s` (simulator.check_timeout_s)
    from their start, over all of their work, whatever step it is in: each step (a jailed Verilator
    run, a child process) gets only the time left."""
    timeout_s: float
    start: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        return self.timeout_s - (time.monotonic() - self.start)

    @property
    def passed(self) -> bool:
        return self.left() <= 0.0

    @property
    def reason(self) -> str:
        return f"the safety checks took longer than simulator.check_timeout_s={self.timeout_s:g} s"


def content_key(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def recall(kind: str, key, cfg: SimConfig) -> dict | None:
    """The cached answer of `kind` for content `key` under cfg's budget, or None."""
    k = content_key(kind, key, cfg.check_timeout_s, cfg.check_mem_mb)
    if k in _CACHE:
        _CACHE.move_to_end(k)
        return _CACHE[k]
    return None


def remember(kind: str, key, cfg: SimConfig, answer: dict) -> dict:
    if "setup" not in answer:  # the jail could not start: nothing was learnt about the content
        _CACHE[content_key(kind, key, cfg.check_timeout_s, cfg.check_mem_mb)] = answer
        while len(_CACHE) > CACHE_ENTRIES:
            _CACHE.popitem(last=False)
    return answer


def run_check(kind: str, payload: dict, cfg: SimConfig, scratch: Path, key=None,
              deadline: Deadline | None = None) -> dict:
    """The child's answer for `kind` on `payload`, or {"over_budget": reason} when it went past the
    deadline (default: simulator.check_timeout_s from now) or check_mem_mb, or died. `key`: the
    content the answer depends on (cached under it); None: not cached."""
    if key is not None and (hit := recall(kind, key, cfg)) is not None:
        return hit
    deadline = deadline or Deadline(cfg.check_timeout_s)
    if deadline.passed:  # nothing is learnt about this step's content: not cached
        return {"over_budget": deadline.reason}
    answer = _run_child(kind, payload, cfg, scratch, deadline)
    return answer if key is None else remember(kind, key, cfg, answer)


def _run_child(kind: str, payload: dict, cfg: SimConfig, scratch: Path, deadline: Deadline) -> dict:
    scratch.mkdir(parents=True, exist_ok=True)
    src, dst = scratch / f"check-{kind}.in.json", scratch / f"check-{kind}.out.json"
    src.write_text(json.dumps(payload))
    dst.unlink(missing_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": _PACKAGE_ROOT,
           "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
    out_mb = 16 + (len(payload.get("text", "")) >> 19)  # the rewritten text comes back: 2x its size
    left = deadline.left()
    r = run_limited([sys.executable, "-m", "chorus.sim.checker", kind, str(src), str(dst), str(cfg.check_mem_mb)],
                    cwd=scratch, env=env, timeout_s=left, cpu_s=left + 1,
                    log_path=scratch / f"check-{kind}.log", mem_mb=_STARTUP_MB + cfg.check_mem_mb, file_mb=out_mb)
    try:
        answer = json.loads(dst.read_text()) if r.returncode == 0 and not r.timed_out else None
    except (OSError, ValueError):
        answer = None
    src.unlink(missing_ok=True)
    dst.unlink(missing_ok=True)
    if isinstance(answer, dict):
        return answer
    if r.timed_out or r.signal in (9, 24):  # wall clock, or SIGKILL / SIGXCPU from the CPU limit
        return {"over_budget": deadline.reason}
    if "MemoryError" in r.log or "bad_alloc" in r.log:
        return {"over_budget": f"the check needed more than simulator.check_mem_mb={cfg.check_mem_mb} MB"}
    return {"over_budget": f"the check stopped (exit {r.returncode}, signal {r.signal}); over simulator."
                           f"check_timeout_s={cfg.check_timeout_s:g} s or check_mem_mb={cfg.check_mem_mb} MB?"}


# ---------------------------------------------------------------- the child's side

def review(payload: dict) -> dict:
    """checked_testbench's pyslang part: {"rejected": why} or {"text", "tops", "unparsed"}."""
    from . import safety, svlex

    text, design = payload["text"], payload["design"]
    units = safety.DesignUnits(frozenset(design["declared"]), frozenset(design["instantiated"]),
                               design["host_access"], frozenset(design["modules"]))
    if why := safety.check_raw_text(text):
        return {"rejected": why}
    try:
        tree = safety.parse(text, payload["name"])
        unparsed = safety.parse_error(tree)
    except RuntimeError:  # slang's parser stops past its nesting limit (about 1,000 levels)
        tree, unparsed = None, "nesting deeper than pyslang parses"
    if unparsed:
        # pyslang's checks cannot see code it could not parse: Verilator's parse (check_ast)
        # still runs, for its error message; if Verilator accepts it, it is refused anyway.
        return {"text": text, "tops": svlex.top_modules(text), "unparsed": unparsed}
    if why := safety.check_testbench(tree, units, payload["allow_dut_writes"]):
        return {"rejected": why}
    return {"text": safety.rewrite_stop_as_finish(tree, text), "tops": safety.top_modules(tree), "unparsed": None}


def judge_tree(payload: dict) -> dict:
    """Verilator's tree read and judged: {"status", "reason"} (tree_verdict.AstVerdict's fields)."""
    from . import json_tree
    from .tree_verdict import judge

    try:
        tree = json_tree.loads(Path(payload["tree"]).read_text(encoding="utf-8", errors="replace"))
        files = json_tree.loads(Path(payload["meta"]).read_text(encoding="utf-8", errors="replace")).get("files", {})
    except (OSError, ValueError) as exc:
        return {"status": "compile_error", "reason": f"Verilator's parse tree is unreadable: {exc}"}
    v = judge(tree, files, set(payload["design_units"]), payload["trusted_rtl"], payload["allow_dut_writes"],
              payload["std_file"])
    duts = None
    if v.status == "ok" and payload.get("dut"):
        from .dut_parameters import instance_signatures

        top, sources = payload["dut"]
        duts = [[where, sig] for where, sig in instance_signatures(tree, files, top, frozenset(sources))]
    return {"status": v.status, "reason": v.reason, "duts": duts}


_KINDS = {"review": review, "judge_tree": judge_tree}


def _vm_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def main(argv: list[str]) -> int:
    kind, src, dst, mem_mb = argv
    from . import safety, svlex, tree_verdict  # noqa: F401 - start-up, before the budget starts

    limit = _vm_bytes() + (int(mem_mb) << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        answer = _KINDS[kind](json.loads(Path(src).read_text()))
    except MemoryError:
        print("MemoryError", file=sys.stderr)
        return 3
    Path(dst).write_text(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
