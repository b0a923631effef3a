"""The feedback message of an agentic round: parse error, trimmed compile log, or the coverage
summary with the uncovered lines and their source (LLM4Cov style)."""
from __future__ import annotations

from ..policy.parsing import Parsed
from ..policy.prompts import FENCE
from ..sim import SimResult


def _error_lines(log: str, limit: int = 12) -> str:
    lines = [ln.rstrip() for ln in log.splitlines() if ln.startswith(("%Error", "%Warning-WIDTH"))]
    return "\n".join(lines[:limit])


def feedback_message(parsed: Parsed, result: SimResult, fmt: str, target: float, max_uncovered: int = 15) -> str:
    if parsed.code is None:
        return (f"Your answer had no usable stimulus block (parse status: {parsed.status}). Reply with "
                f"`filename:` and exactly one ```{FENCE[fmt]} block.")
    if result.status != "ok" or result.report is None:
        log = _error_lines(result.build_log) or result.run_log.strip()[-800:]
        return (f"The stimulus did not produce coverage: {result.status}: {result.reason}\n"
                + (f"Log:\n{log}\n" if log else "") + "Fix it and reply with the whole corrected stimulus.")
    r = result.report
    counts = ", ".join(f"{m} {c}/{t}" for m, (c, t) in r.counts.items())
    lines = [f"Coverage of {r.instance}: overall {r.overall:.1f}% (target {target:.0f}%); {counts}."]
    if r.uncovered:
        lines.append("Not yet covered:")
        for u in r.uncovered[:max_uncovered]:
            lines.append(f"  {u.file}:{u.line} {u.metric} {u.what}" + (f" | {u.source}" if u.source else ""))
        if len(r.uncovered) > max_uncovered:
            lines.append(f"  ... and {len(r.uncovered) - max_uncovered} more")
    lines.append("Extend the stimulus to reach them and reply with the whole revised stimulus.")
    return "\n".join(lines)
