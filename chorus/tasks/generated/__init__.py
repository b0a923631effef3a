"""Procedurally generated designs with deep coverage holes, and graded reference stimulus.

`generate_tasks(seed, per_family, difficulty, families)` builds `per_family` designs for each
family. A design depends only on (family, seed, difficulty, index), so asking for more tasks
extends the list without changing the first ones. Each design hides coverage that uniform
random stimulus rarely reaches: long counts before a wrap, states behind a specific input
sequence, magic-value comparisons, rare opcode x flag combinations. `difficulty` deepens them.

Each task's `meta["programs"]` holds `vectors` stimulus at four grades: `strong` (reaches the
holes), `medium` (partial), `weak` (a few cycles) and `compact` (a random burst plus the cases its
brief names, within random stimulus's cycle budget); `reference_tb` is the strong program as a whole
testbench. `Task.brief` states the design's key facts in a few lines on the input aliases.

A generated task's target is measured, not chosen: `calibrate_targets` (which the suite loader,
`load_tasks("generated")`, applies) sets it between uniform random stimulus and the strong program.
Until then `targets` holds the strong program's nominal 100 %.
"""
from __future__ import annotations

import random

from ...core.task import Task
from . import alu, counter, fsm, mux_cmp, shift_lfsr
from .common import DIFFICULTIES, MIXED, make_task, reference_testbench
from .targets import calibrate_targets

FAMILIES = {
    "counter": counter,
    "fsm": fsm,
    "alu": alu,
    "mux_cmp": mux_cmp,
    "shift_lfsr": shift_lfsr,
}
# strategy name -> the skill it exercises: `exact` (type the value or sequence the brief gives),
# `sweep` (drive random values with the strobe held: finds what the brief keeps secret), `climb`
# (count a counter up to its top). Stages can be given different skills (sft_stage.skills).
SKILLS = {name: skill for module in FAMILIES.values() for name, skill in getattr(module, "SKILLS", {}).items()}

def design_class(task: Task) -> str:
    """family/difficulty/skills: the skills of the strategies that reach the task's target
    (meta["reaches"], set by calibrate_targets; `none` when none does, `-` for a design without
    strategies). A world prunes what no model learns by these classes (tasks.prune)."""
    reaches = task.meta.get("reaches")
    skills = "-" if reaches is None else "+".join(sorted({SKILLS[n] for n in reaches})) or "none"
    return f"{task.family}/{task.difficulty}/{skills}"


def prune(tasks: list[Task], patterns: list[str] | None) -> list[Task]:
    """The tasks whose design class (design_class) matches none of the glob patterns."""
    import fnmatch

    if not patterns:
        return tasks
    return [t for t in tasks if not any(fnmatch.fnmatchcase(design_class(t), p) for p in patterns)]


def generate_task(family: str, k: int, seed: int = 0, difficulty: str = "medium",
                  with_reference_tb: bool = True) -> Task:
    """The k-th design of one family (deterministic in family, k, seed and difficulty). MIXED: the
    staged world's mixture, design k at DIFFICULTIES[k % 3] with the family's strategies."""
    _check(difficulty, [family])
    rng = random.Random(f"chorus-generated/{family}/{difficulty}/{seed}/{k}")
    module = FAMILIES[family]
    if difficulty == MIXED:
        level = DIFFICULTIES[k % len(DIFFICULTIES)]
        staged = {"staged": True} if getattr(module, "STRATEGIES", None) else {}
        task = make_task(family, k, seed, level, module.build(rng, k, level, **staged), world=MIXED)
    else:
        task = make_task(family, k, seed, difficulty, module.build(rng, k, difficulty))
    if with_reference_tb:
        task.reference_tb = reference_testbench(task)
    return task


def generate_tasks(seed: int = 0, per_family: int = 8, difficulty: str = "medium",
                   families: list[str] | None = None) -> list[Task]:
    if isinstance(families, str):  # "counter,fsm" from a command line
        families = [f.strip() for f in families.split(",") if f.strip()]
    names = list(FAMILIES) if families is None else list(families)
    _check(difficulty, names)
    if int(per_family) < 0:
        raise ValueError(f"per_family must be >= 0, got {per_family}")
    return [generate_task(f, k, int(seed), difficulty) for f in names for k in range(int(per_family))]


def _check(difficulty: str, families: list[str]) -> None:
    if difficulty not in (*DIFFICULTIES, MIXED):
        raise ValueError(f"unknown difficulty {difficulty!r}; choose one of {[*DIFFICULTIES, MIXED]}")
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown generated famil{'y' if len(unknown) == 1 else 'ies'} {unknown}; "
                         f"choose from {list(FAMILIES)}")


__all__ = ["FAMILIES", "SKILLS", "design_class", "prune", "DIFFICULTIES", "MIXED", "calibrate_targets", "generate_task", "generate_tasks"]
