"""The exported checkpoint chosen on validation (rl.select_every): the policy is evaluated on validation
tasks before training (step 0, its init) and every rl.select_every steps up to the last; the weights
with the best validation Pass@1 (the earliest of equals: less training for the same score) are the
run's result, its held-out evaluation included. The learning curve is <run dir>/selection.jsonl, one
row per evaluation; the best weights so far are kept on disk (select/best.safetensors), so a resumed
run chooses among every evaluation it made, and nothing the size of a model stays in memory."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ..config.schema import RLConf


def select_steps(rl: RLConf, steps: int) -> list[int]:
    """The steps evaluated on validation: 0 (the init), every rl.select_every, and the last."""
    if rl.select_every <= 0:
        return []
    return sorted({0, *range(rl.select_every, steps, rl.select_every), steps})


def best_point(curve: list[dict]) -> dict | None:
    """The chosen validation evaluation of a curve (selection.jsonl's rows): the highest Pass@1, then
    the earliest step (less training for the same score); None for an empty curve."""
    return min(curve, key=lambda r: (-r["pass_rate"], r["step"])) if curve else None


@dataclasses.dataclass
class Selection:
    """Validation evaluations and the best weights so far, under <out>/select."""
    out: Path
    steps: list[int]

    @property
    def dir(self) -> Path:
        return self.out / "select"

    def curve(self) -> list[dict]:
        path = self.out / "selection.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []

    def best(self) -> dict | None:
        return best_point(self.curve())

    def record(self, step: int, summary: dict, model: torch.nn.Module) -> None:
        """Append step's validation result; keep its weights when they are the best so far."""
        before = self.best()
        row = {"step": step, "pass_rate": summary["pass_rate"], "mean_overall": summary["mean_overall"],
               "tasks": summary["n_tasks"], "samples": summary["n_samples"]}
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.out / "selection.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        if before is None or row["pass_rate"] > before["pass_rate"]:
            state = {k: v.detach().to("cpu", copy=True).contiguous() for k, v in model.state_dict().items()}
            save_file(state, str(self.dir / "best.safetensors"))
            (self.dir / "best.json").write_text(json.dumps(row))

    def trim(self, step: int) -> None:
        """A resumed run forgets evaluations after its resume point (they are made again)."""
        rows = [r for r in self.curve() if r["step"] <= step]
        if (self.out / "selection.jsonl").exists():
            (self.out / "selection.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    def restore(self, model: torch.nn.Module) -> dict:
        """Load the chosen weights into `model` (unless they are the last step's, which it holds)."""
        best = self.best()
        if best is None:
            raise ValueError(f"no validation evaluation in {self.out / 'selection.jsonl'}; cannot choose a checkpoint")
        kept = json.loads((self.dir / "best.json").read_text())
        if kept["step"] != best["step"]:  # a resume trimmed the curve under the kept weights
            raise ValueError(f"{self.dir / 'best.json'} keeps step {kept['step']}, the curve's best is step "
                             f"{best['step']}; delete {self.dir} and re-run the job")
        if best["step"] != max(r["step"] for r in self.curve()):
            model.load_state_dict(load_file(str(self.dir / "best.safetensors")))
        return best
