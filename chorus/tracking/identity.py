"""A run's record: the run.json in its dir, holding its identity (the settings that shaped its
results) and which of them differ from the defaults; how two records compare, and whether a dir may
be reused. Which settings an identity holds, and the dir they name, is config/run_identity.py's: it
needs the settings each job reads, while reading and matching records (the pipeline's steps, SFT's
and OPD's checkpoint lookups) needs nothing above tracking.
"""
from __future__ import annotations

import json
from pathlib import Path

RUN_RECORD = "run.json"


def flatten(value, prefix: str = "", sep: str = ".") -> dict:
    """Nested json as {key: leaf}, keys joined by `sep` (dotted: a config's settings; "/": W&B's summary
    keys, wandb_mirror) after `prefix` (empty, or ending in `sep`). Lists of dicts (teacher_pool.teachers)
    are flattened by index; any other list is a leaf, and an empty dict leaves nothing."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        items = enumerate(value)
    else:
        return {prefix[:-len(sep)] if prefix else prefix: value}
    out = {}
    for k, v in items:
        out.update(flatten(v, f"{prefix}{k}{sep}", sep))
    return out


def differences(planned: dict, recorded: dict) -> list[str]:
    """`key: recorded -> planned` for every setting on which two run records ({"identity", "changed"})
    disagree. A run is named by its non-default settings (`changed`, what run_dir hashes), so only those
    are compared: a key both runs leave at the defaults of their revision is no difference, whether the
    default moved since (rl.micro_batch: 8, then null = auto), a setting was added (model.pretrain_steps)
    or retired (consolidation.mode). Kept runs therefore keep matching the plans that name them. A record
    without `changed` (made before it was recorded) is compared setting by setting."""
    mine, theirs = planned.get("identity", {}), recorded.get("identity", {})
    if "changed" in planned and "changed" in recorded:
        keys = {"job", *planned["changed"], *recorded["changed"]}
    else:
        keys = set(mine) | set(theirs)
    return [f"{k}: {theirs.get(k)!r} -> {mine.get(k)!r}" for k in sorted(keys) if mine.get(k) != theirs.get(k)]


def default_drift(planned: dict, recorded: dict) -> list[str]:
    """The settings both runs leave at their defaults whose values differ: the defaults moved between
    the two revisions (not a difference of the runs; worth a note)."""
    mine, theirs = planned.get("identity", {}), recorded.get("identity", {})
    skip = {*planned.get("changed", {}), *recorded.get("changed", {})}
    return [f"{k}: {theirs[k]!r} -> {mine[k]!r}" for k in sorted(set(mine) & set(theirs) - skip)
            if mine[k] != theirs[k]]


def settings(c: dict) -> dict:
    """Every setting of the composed config `c`, flat, with paths inside runs_dir relative to it (what
    an identity holds, for all keys: the defaults a run's settings are compared with)."""
    root = str(c["runs_dir"]).rstrip("/") + "/"
    return {k: "${runs_dir}/" + v[len(root):] if isinstance(v, str) and v.startswith(root) else v
            for k, v in flatten(c).items()}


def changed_settings(ident: dict, default: dict) -> dict:
    """The settings of an identity whose values differ from `default` (settings() of what the same
    groups compose to): only non-default values, whether or not the default run reads the key (a
    setting read only under another one, e.g. a merge's density, counts only when moved)."""
    return {k: v for k, v in sorted(ident.items()) if k != "job" and v != default.get(k)}


def variants(default_dir: Path) -> list[Path]:
    """Runs of the same group path made with other settings (`<dir>-<tag or hash>`) that hold a
    checkpoint: what a missing default checkpoint's error names."""
    d = Path(default_dir)
    return sorted(p.parent.parent for p in d.parent.glob(f"{d.name}-*/hf/config.json"))


def read_record(out: Path) -> dict | None:
    try:
        return json.loads((Path(out) / RUN_RECORD).read_text())
    except (OSError, ValueError):
        return None


def check_reuse(out: Path, record: dict) -> list[str]:
    """Refuse a dir that holds a run made with other settings (same group path and hash, but another
    run_tag's hash collides, or the dir predates identities); return the defaults that moved since
    that run (default_drift), for a note."""
    old = read_record(out)
    if old is None:
        if (Path(out) / "summary.json").exists():
            raise ValueError(f"{out} holds results without a {RUN_RECORD} (made before run identities were "
                             "recorded); move it away or set another runs_dir")
        return []
    diff = differences(record, old)
    if diff:
        raise ValueError(f"{out} holds a run made with other settings ({'; '.join(diff[:3])}"
                         f"{'; ...' if len(diff) > 3 else ''}); move it away, or set run_tag= or another runs_dir")
    return default_drift(record, old)


def has_results(out: Path, job: str | None) -> bool:
    """Whether a run dir holds a finished run: every chorus job ends by writing summary.json; an SFT
    stage made with sft_stage.evaluate=false before it wrote one ended with its stage.json."""
    out = Path(out)
    return (out / "summary.json").exists() or (job == "sft" and (out / "stage.json").exists())


def write_record(out: Path, record: dict) -> None:
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / RUN_RECORD).write_text(json.dumps(record, indent=2, default=str) + "\n")
