"""A run's identity: the settings that shaped its results, and the run dir they determine.

A run dir is its group path (sft/<stage>, rl/<algo>/<stage>, consolidation/<method>/<pool>) plus, when
any setting the job reads differs from what those groups compose to by default, a short hash of
those differences: `consolidation/ties/three_experts-3f9c01ab`. Two runs that differ in anything
that matters therefore never share a dir (a multirun over densities leaves one dir per density),
and the default runs keep the plain paths the teacher pools and stage chains refer to.

The dir's run.json records the identity; a job refuses to write into a dir made with different
settings, and the pipeline counts a step as done only when the recorded identity equals its plan.
Those records (writing, reading, comparing them) are tracking/identity.py's: only naming a run needs
the settings each job reads (job_settings), so only that part sits up here in config.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..tracking.identity import changed_settings, settings
from .job_settings import BOOKKEEPING, used_settings


def _covered(key: str, prefixes) -> bool:
    return any(key == p or key.startswith(p + ".") for p in prefixes)


def identity(job: str, c: dict) -> dict:
    """The settings `job` reads in the composed config `c`, flat and sorted; paths inside runs_dir are
    written relative to it, so a moved runs_dir keeps its identities."""
    uses = used_settings(job, c)
    return {"job": job, **{k: v for k, v in sorted(settings(c).items())
                           if _covered(k, uses) and not _covered(k, BOOKKEEPING)}}


def short_hash(changed: dict) -> str:
    return hashlib.sha256(json.dumps(changed, sort_keys=True, default=str).encode()).hexdigest()[:8]


def group_path(job: str, c: dict) -> Path:
    if job == "sft":
        return Path("sft") / c["sft_stage"]["name"]
    if job == "rl":
        return Path("rl") / c["rl_algo"]["name"] / c["sft_stage"]["name"]
    return Path("consolidation") / c["consolidation"]["name"] / c["teacher_pool"]["name"]


def run_dir(job: str, c: dict, default: dict) -> tuple[Path, dict]:
    """(run dir, record) of `job` under the composed config `c`; `default` is what the same group path
    composes to with no other overrides (the entry point composes it; see train.default_config)."""
    ident = identity(job, c)
    changed = changed_settings(ident, settings(default))
    path = group_path(job, c)
    name = "-".join([path.name, *([c["run_tag"]] if c.get("run_tag") else []),
                     *([short_hash(changed)] if changed else [])])
    return Path(c["runs_dir"]) / path.parent / name, {"identity": ident, "changed": changed}
