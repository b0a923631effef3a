"""What one simulation returns."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .coverage import CoverageReport

STATUSES = ("ok", "compile_error", "runtime_error", "timeout", "rejected", "harness_error", "empty")
# the statuses whose coverage counts: a run that stopped on an error (a fatal, the output limit) keeps
# what it covered before that. Defined here, with the statuses, because the reward (rl/rewards.py) and
# the feedback a model reads (protocol/feedback.py, protocol/agentic.py) apply the same rule.
COVERAGE_COUNTS = ("ok", "runtime_error")


@dataclass
class SimResult:
    status: str
    reason: str = ""  # one line saying what happened when status is not ok
    report: CoverageReport | None = None
    end: str | None = None  # finish | stop | max_time | idle | fatal | output_limit
    build_log: str = ""
    run_log: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    cached: bool = False

    @property
    def overall(self) -> float | None:
        return self.report.overall if self.report else None

    @property
    def instance_ok(self) -> bool:
        return bool(self.report and self.report.instance_ok)

    def passed(self, target: float, strict_instance: bool = False) -> bool:
        if self.status != "ok" or self.overall is None:
            return False
        if strict_instance and not self.instance_ok:
            return False
        return self.overall >= target - 1e-9

    def to_dict(self) -> dict:
        d = asdict(self)
        d["report"] = self.report.to_dict() if self.report else None
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "SimResult":
        d = dict(d)
        if d.get("report") is not None:
            d["report"] = CoverageReport.from_dict(d["report"])
        return cls(**d)
