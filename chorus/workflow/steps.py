"""A pipeline step: one `python -m chorus.<job>` command line, the run dir it fills, what it waits for."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..tracking.identity import RUN_RECORD, differences, has_results, read_record


@dataclass
class Step:
    name: str  # sft/stage0, rl/stage1, consolidation/ties, ...
    module: str  # chorus.train
    overrides: list[str]
    run_dir: Path
    after: list[str] = field(default_factory=list)
    identity: dict | None = None  # the settings the run dir's run.json must record (None: any results do)
    changed: dict | None = None  # of those, the ones that differ from the groups' defaults
    # chorus.evaluate writes its results into its Hydra run dir: that dir is then the run dir (named by
    # a hash of the step's overrides, so other settings never reuse it)
    results_in_hydra_dir: bool = False

    def hydra_dir(self, hydra_root: Path) -> Path:
        return self.run_dir if self.results_in_hydra_dir else hydra_root / self.name

    def state(self) -> tuple[str, list[str]]:
        """("done", []) when the run dir holds results made with exactly the planned settings;
        ("stale", differences) when it holds results made with others; ("todo", []) otherwise."""
        if not has_results(self.run_dir, (self.identity or {}).get("job")):
            return "todo", []
        if self.identity is None:
            return "done", []
        recorded = read_record(self.run_dir)
        if recorded is None:
            return "stale", [f"no {RUN_RECORD} (made before run identities were recorded)"]
        planned = {"identity": self.identity, **({"changed": self.changed} if self.changed is not None else {})}
        diff = differences(planned, recorded)
        return ("stale", diff) if diff else ("done", [])

    def done(self) -> bool:
        return self.state()[0] == "done"

    def argv(self, hydra_dir: Path) -> list[str]:
        return [sys.executable, "-m", self.module, *self.overrides, f"hydra.run.dir={hydra_dir}"]

    def command(self) -> str:
        """The line a user types to run this step alone."""
        return " ".join(["python", "-m", self.module, *(f"'{o}'" if any(c in o for c in " [],{}$") else o
                                                         for o in self.overrides)])


def check_dag(steps: list[Step]) -> None:
    names = [s.name for s in steps]
    for s in steps:
        missing = [a for a in s.after if a not in names[:names.index(s.name)]]
        if missing:
            raise ValueError(f"step {s.name} waits for {missing}, which do not come before it")

