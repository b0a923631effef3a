"""A pipeline step: one `python -m chorus.<job>` command line, the run dir it fills, what it waits for."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Step:
    name: str  # sft/stage0, rl/stage1, consolidation/ties, ...
    module: str  # chorus.train
    overrides: list[str]
    run_dir: Path
    after: list[str] = field(default_factory=list)

    def done(self) -> bool:
        """The job's results exist (every chorus.train job ends by writing summary.json), so a re-run skips it."""
        return (self.run_dir / "summary.json").exists()

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


def write_record(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records, indent=2) + "\n")
