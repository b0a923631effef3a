"""The feedback message of an agentic round: parse error, trimmed compile log, or the coverage
summary with the uncovered lines and their source (LLM4Cov style).

chorus's own verdict is its lines outside any block; everything the sample can shape (a result's
reason, which quotes compiler errors, exceptions and $fatal messages, and the logs) goes only inside
one labelled fenced block that no text in it can close. The verdict says whether coverage counted
by the same rule as the reward (sim/result.COVERAGE_COUNTS)."""
from __future__ import annotations

import re

from ..policy.parsing import Parsed
from ..policy.prompts import FENCE
from ..sim import SimResult
from ..sim.result import COVERAGE_COUNTS


def _error_lines(log: str, limit: int = 12) -> str:
    lines = [ln.rstrip() for ln in log.splitlines() if ln.startswith(("%Error", "%Warning-WIDTH"))]
    return "\n".join(lines[:limit])


def quoted_block(label: str, text: str) -> str:
    """`text` in a fenced block under `label`, its fence one backtick longer than any run of backticks
    in it (at least three), so nothing inside can end the block early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{label}\n{fence}text\n{text.rstrip()}\n{fence}\n"


def _quoted_output(result: SimResult) -> str:
    log = _error_lines(result.build_log) or result.run_log.strip()[-800:]
    text = "\n".join(part for part in (result.reason.strip(), log) if part)
    return quoted_block("What the run reported (quotes your stimulus and its output):", text) if text else ""


def feedback_message(parsed: Parsed, result: SimResult, fmt: str, target: float, max_uncovered: int = 15) -> str:
    if parsed.code is None:
        return (f"Your answer had no usable stimulus block (parse status: {parsed.status}). Reply with "
                f"`filename:` and exactly one ```{FENCE[fmt]} block.")
    quoted = _quoted_output(result)
    r = result.report
    if result.status not in COVERAGE_COUNTS or r is None:
        return (f"The stimulus did not produce coverage ({result.status}); no coverage counted.\n" + quoted
                + "Fix it and reply with the whole corrected stimulus.")
    counts = ", ".join(f"{m} {c}/{t}" for m, (c, t) in r.counts.items())
    lines = []
    if result.status != "ok":
        lines.append(f"The stimulus stopped early ({result.status}); the coverage it reached before that counted.")
    lines.append(f"Coverage of {r.instance}: overall {r.overall:.1f}% (target {target:.0f}%); {counts}.")
    if r.uncovered:
        lines.append("Not yet covered:")
        for u in r.uncovered[:max_uncovered]:
            lines.append(f"  {u.file}:{u.line} {u.metric} {u.what}" + (f" | {u.source}" if u.source else ""))
        if len(r.uncovered) > max_uncovered:
            lines.append(f"  ... and {len(r.uncovered) - max_uncovered} more")
    if result.status != "ok" and quoted:
        lines.append(quoted.rstrip("\n"))
    lines.append("Extend the stimulus to reach them and reply with the whole revised stimulus."
                 if result.status == "ok" else "Fix the error, extend the stimulus and reply with the whole revised "
                 "stimulus.")
    return "\n".join(lines)
