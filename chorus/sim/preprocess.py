"""Run Verilator's own preprocessor over design + testbench, jailed, and split the output.

The build then compiles exactly the testbench text checked by safety.py. The design files come
first, as in the build, so macros they define reach the testbench the same way; a random
sentinel line between them and the testbench marks where the testbench's output starts (the
testbench cannot forge it: it never sees the value, and only the first occurrence counts).

Every `line marker in the testbench's output is pinned to the testbench's own file: a `line
directive or an `include of an RTL file would otherwise give testbench code the RTL's file name,
and coverage is attributed by source file (execute.score_points). Any other `line text, even in a
string, is refused, so no lexer disagreement can leave a marker the build would obey.
"""
from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from .build import build_jail, define_args, verilator_errors
from .checker import Deadline
from .config import SimConfig
from .process import run_limited
from .toolchain import Toolchain

EXPANSION_FACTOR = 8  # preprocessed testbench may be this many times the raw size cap


@dataclass
class Preprocessed:
    rtl: str | None = None
    testbench: str | None = None
    status: str = "ok"  # ok | timeout | failed | too_large | refused | setup
    reason: str = ""
    log: str = ""


def preprocess(tc: Toolchain, cfg: SimConfig, cache_root: Path, workdir: Path, rtl_sources: list[str],
               tb_rel: str, defines: dict[str, str], deadline: Deadline) -> Preprocessed:
    """The preprocessed design and testbench; the first of a sample's safety checks, so within
    `deadline` (checker.Deadline)."""
    if deadline.passed:
        return Preprocessed(status="refused", reason=deadline.reason)
    design, out = workdir / "design", workdir / "out"
    token = f"chorus_sentinel_{secrets.token_hex(12)}"
    sentinel = f"verif/{token}.sv"
    (design / sentinel).parent.mkdir(parents=True, exist_ok=True)
    (design / sentinel).write_text(token + "\n")
    rtl_mb = sum((design / f).stat().st_size for f in rtl_sources) >> 20
    limit_mb = max(1, cfg.max_testbench_kb * EXPANSION_FACTOR // 1024) + 2 * rtl_mb + 16
    cmd = [str(tc.verilator), "-E", *define_args(defines), *rtl_sources, sentinel, tb_rel]
    pre = out / "preprocessed.sv"
    own_limit = min(60.0, cfg.build_timeout_s)
    timeout_s = min(own_limit, deadline.left())
    r = run_limited(cmd, cwd=design, env=tc.env(), timeout_s=timeout_s, log_path=out / "pre.log",
                    mem_mb=cfg.mem_limit_mb, file_mb=limit_mb, stdout_path=pre,
                    jail=build_jail(cfg, cache_root, (design,), ()))
    (design / sentinel).unlink()
    if r.setup_error:
        return Preprocessed(status="setup", reason=f"isolation could not be set up: {r.setup_error}")
    if r.timed_out and timeout_s < own_limit:
        return Preprocessed(status="refused", reason=deadline.reason + " (in the preprocessor)", log=r.log)
    if r.timed_out:
        return Preprocessed(status="timeout", reason="the preprocessor did not finish (macros that never end?)",
                            log=r.log)
    if r.signal is not None:
        return Preprocessed(status="too_large", reason=f"the preprocessor was stopped by signal {r.signal} "
                            f"(macros expanding past {limit_mb} MB or the memory limit?)", log=r.log)
    if r.returncode != 0:
        errors = verilator_errors(r.log)
        return Preprocessed(status="failed", reason=(errors[0] if errors else r.log.strip()[-300:])[:300], log=r.log)
    text = pre.read_text(errors="replace")
    # The sentinel file's own name appears first, in a `line marker; its content is the bare line.
    head, found, tail = text.partition(f"\n{token}\n")
    if not found:
        return Preprocessed(status="failed", reason="the preprocessed output lost its sentinel", log=r.log)
    if len(tail) > cfg.max_testbench_kb * 1024 * EXPANSION_FACTOR:
        return Preprocessed(status="too_large", reason=f"the testbench's macros expand to {len(tail) // 1024} KB, "
                            f"over {EXPANSION_FACTOR} x simulator.max_testbench_kb", log=r.log)
    pinned = pin_line_markers(tail, tb_rel)
    if pinned is None:
        return Preprocessed(status="refused", reason="a `line directive outside Verilator's own line markers (even "
                            "inside a string) is not allowed: coverage is attributed by source file", log=r.log)
    return Preprocessed(rtl=head, testbench=pinned, log=r.log)


# Verilator's preprocessor writes a marker on a line of its own: `line <line> "<file>" <level>
_MARKER = re.compile(r'^`line (\d+) "[^"\n]*" ([012])$', re.M)
_ANY_LINE = re.compile(r"`\s*line\b")


def pin_line_markers(text: str, own_file: str) -> str | None:
    """`text` with every line marker naming `own_file` (line numbers kept for messages), or None
    when `line appears anywhere else."""
    if _ANY_LINE.search(_MARKER.sub("", text)):
        return None
    return _MARKER.sub(lambda m: f'`line {m[1]} "{own_file}" {m[2]}', text)
