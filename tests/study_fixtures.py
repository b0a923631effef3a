"""Synthetic study v2 seed dirs for the tests: controls.json of write_manifest and run dirs with
summary.json and per_task.parquet, experts drawn from a known model (write_study's docstring)."""
from pathlib import Path

import numpy as np
import pandas as pd

from chorus.analysis.study_manifest import STAGES, write_manifest
from chorus.tracking.run_dir import PARQUET, write_summary

REVISION = "0123456789abcdef0123456789abcdef01234567"


def write_run(run: Path, rates: np.ndarray, samples: int, rng, **meta) -> Path:
    """A finished run dir: per_task.parquet (task_id, sample, status, overall, passed: each sample
    passes with its task's rate; coverage 96 on a pass, 40 on a fail) and summary.json."""
    T = len(rates)
    passed = rng.random((T, samples)) < rates[:, None]
    table = pd.DataFrame({"task_id": np.repeat([f"task{t:03d}" for t in range(T)], samples),
                          "sample": np.tile(np.arange(samples), T), "status": "ok",
                          "overall": np.where(passed.ravel(), 96.0, 40.0), "passed": passed.ravel()})
    run.mkdir(parents=True)
    table.to_parquet(run / PARQUET, index=False)
    write_summary(run, {"git_revision": REVISION, "machine": "cpu-test", "pass_coverage": None, "model": "tiny-s",
                        "pass_rate": float(passed.mean()), **meta})
    return run


def write_seed(root: Path, experts: np.ndarray, rng, samples: int = 8, families: np.ndarray | None = None,
               families_opd: np.ndarray | None = None, consolidations: dict | None = None, seed: int = 0,
               agentic: np.ndarray | None = None, opd_controls: dict | None = None) -> Path:
    """A v2 seed dir: experts (tasks x stages*R, stage-major) as rl/dapo/stage{i}-r{j}, each with its
    own RL seed; optional families (tasks x F) with their OPD, and consolidations {method: rates}."""
    R = experts.shape[1] // len(STAGES)
    runs = {s: [write_run(root / f"rl/dapo/{s}-r{j}", experts[:, i * R + j], samples, rng, job="rl",
                          rl_algo="dapo", sft_stage=s, seed=seed * 1000 + 10 * i + j) for j in range(R)]
            for i, s in enumerate(STAGES)}
    fam = [write_run(root / f"rl/dapo/stage0-fam{j}", families[:, j], samples, rng, job="rl", rl_algo="dapo",
                     sft_stage="stage0", seed=seed * 1000 + 500 + j) for j in range(families.shape[1])] \
        if families is not None else []
    fam_opd = write_run(root / "consolidation/opd/families", families_opd, samples, rng, job="consolidation",
                        consolidation="opd", teacher_pool="families", seed=seed) if families_opd is not None else None
    cons = {m: write_run(root / f"consolidation/{m}/three_experts", r, samples, rng, job="consolidation",
                         consolidation=m, teacher_pool="three_experts", seed=seed)
            for m, r in (consolidations or {}).items()}
    feedback = {st: write_run(root / f"evaluate/agentic/{st}", agentic[:, i], samples, rng, job="evaluate",
                              policy="model", seed=seed) for i, st in enumerate(STAGES)} if agentic is not None else None
    own_rng = np.random.default_rng(seed + 99)  # its own draws: the other runs' samples stay as they were
    controls = {k: write_run(root / f"control/{k}", r, samples, own_rng, job="rl", seed=seed)
                for k, r in (opd_controls or {}).items()}
    write_manifest(root, runs, cons, fam, fam_opd, agentic=feedback, opd_controls=controls)
    return root


def logistic(x):
    return 1 / (1 + np.exp(-x))


def centred(x: np.ndarray) -> np.ndarray:
    return x - x.mean(axis=0, keepdims=True)


def write_study(base: Path, stage_sd: float, seed: int, T: int = 60, samples: int = 8, controls: bool = True,
                own_teacher: float = 0.5) -> list:
    """Three seed dirs of 3 stages x 3 RL seeds. Logit = task difficulty + the seed's shift (a level
    and a task pattern its experts share: between-seed heterogeneity) + a stage pattern of sd
    stage_sd x (0.6, 1.0, 1.4 by seed) + an RL-seed pattern of sd 1 (patterns centred over the tasks,
    so stages differ in what they solve more than in how much). With controls: three family
    experts each at 0.85 on its own third of the tasks (0.1 elsewhere), their OPD at 0.6 everywhere,
    and opd/soup consolidations of the staged experts; OPD's controls: the families' own-teacher run at
    `own_teacher` everywhere, random routing 0.45, no gate 0.55, their soup 0.3, and the staged OPD's
    own-teacher run at the staged experts' mean."""
    rng = np.random.default_rng(seed)
    dirs = []
    for k, het in enumerate((0.6, 1.0, 1.4)):
        logit = (rng.normal(0, 1.5, (T, 1)) + rng.normal(0, 0.4) + rng.normal(0, 0.7, (T, 1))
                 + np.repeat(centred(rng.normal(0, stage_sd * het, (T, 3))), 3, axis=1)
                 + centred(rng.normal(0, 1.0, (T, 9))))
        experts = logistic(logit)
        extra = {}
        if controls:
            fam = np.full((T, 3), 0.1)
            for j in range(3):
                fam[j::3, j] = 0.85
            extra = {"families": fam, "families_opd": np.full(T, 0.6),
                     "consolidations": {"opd": experts.max(axis=1), "soup": experts.mean(axis=1)},
                     "opd_controls": {"families/own_teacher": np.full(T, own_teacher),
                                      "families/random": np.full(T, 0.45), "families/no_gate": np.full(T, 0.55),
                                      "families/soup": np.full(T, 0.3), "staged/own_teacher": experts.mean(axis=1)}}
        dirs.append(write_seed(base / f"seed{k}", experts, rng, samples, seed=k, **extra))
    return dirs
