"""Which tasks each rollout step uses, and how many steps a run takes. The sampler's position is the
RL run's data position: a checkpoint stores it, so a resumed run draws exactly the tasks a straight
run would have."""
from __future__ import annotations

import math
import random

from ..config.schema import RLConf


def rollout_steps(rl: RLConf, n_tasks: int) -> int:
    """A run's length in rollout steps (the one place it is decided; RL and OPD alike): rl.steps, or,
    with rl.passes, enough rollouts of rl.prompts_per_step tasks to draw every one of the `n_tasks`
    training tasks that many times (rounded up)."""
    if rl.passes is None:
        return rl.steps
    if rl.passes <= 0:
        raise ValueError(f"rl.passes={rl.passes}: give the passes over the training tasks (> 0), or null for rl.steps")
    return max(1, math.ceil(rl.passes * n_tasks / rl.prompts_per_step))


class TaskSampler:
    """Walks the tasks in a fresh seeded permutation per epoch (each task once per epoch)."""

    def __init__(self, tasks, seed: int = 0):
        if not tasks:
            raise ValueError("no RL tasks selected; check rl.tasks (suite, split, difficulty)")
        self.tasks, self.seed = list(tasks), seed
        self.epoch, self.index, self.drawn = 0, 0, 0
        self._order = self._permutation()

    def _permutation(self) -> list[int]:
        order = list(range(len(self.tasks)))
        random.Random(self.seed * 1_000_003 + self.epoch).shuffle(order)
        return order

    def draw(self, k: int) -> list:
        out = []
        for _ in range(k):
            if self.index >= len(self.tasks):
                self.epoch, self.index = self.epoch + 1, 0
                self._order = self._permutation()
            out.append(self.tasks[self._order[self.index]])
            self.index += 1
            self.drawn += 1
        return out

    def draw_share(self, k: int, world_size: int, rank: int) -> list:
        """This rank's k tasks under data parallelism: every rank advances the same data position by
        k x world_size tasks and takes every world_size-th one from its rank on, so the ranks train
        on disjoint tasks and all hold the same position (any rank's checkpoint resumes them all)."""
        return self.draw(k * world_size)[rank::world_size]

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "index": self.index, "drawn": self.drawn, "seed": self.seed,
                "n_tasks": len(self.tasks)}

    def load_state_dict(self, state: dict) -> None:
        if state["n_tasks"] != len(self.tasks):
            raise ValueError(f"the checkpoint's data position is over {state['n_tasks']} tasks, this run has "
                             f"{len(self.tasks)}; resume with the same rl.tasks or set rl.resume=false")
        self.seed, self.epoch, self.index, self.drawn = state["seed"], state["epoch"], state["index"], state["drawn"]
        self._order = self._permutation()
