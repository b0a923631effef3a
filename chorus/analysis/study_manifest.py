"""A study seed's manifest (controls.json): which run dir plays which part, read and checked.

A pipeline run with controls writes controls.json into its runs_dir; `analyze study_keep=` copies it,
with each named run's summary.json and per-task table, into analysis/studies/... The v2 (crossed)
format:

    {"design": 2,
     "experts": {"stage0": [dir, dir, dir], "stage1": [...], "stage2": [...]},  # stage x RL seed
     "consolidations": {"soup": dir, "opd": dir, ...},   # over the first expert of every stage
     "families": [dir, ...], "families_opd": dir,         # the positive control (optional)
     "opd_controls": {"staged/own_teacher": dir, "families/own_teacher": dir, "families/random": dir,
                      "families/no_gate": dir, "families/soup": dir},  # OPD's controls (optional)
     "agentic": {"stage0": dir, ...}}                      # first experts under protocol=agentic (optional)

Every expert has its own RL seed (its summary.json's `seed`), so a staged triplet (one expert per
stage) and a same-stage triplet differ in the stage only. v1's files (the staged study of
2026-12-03: `staged`, `same_stage`, `families`, `families_opd`) are read into the same shape, marked
design 1: their staged experts share one RL seed, which `rl_seeds_distinct` reports.

A manifest is refused, in one line naming the offender, when a run it names is missing or has no
results, or when its runs were made at different git revisions or on different machine kinds (the
summaries' `git_revision` and `machine`; a run that does not record a machine counts as `unknown`).
"""
from __future__ import annotations

import glob
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..opd.routing import CONTROLS
from ..tracking.run_dir import PARQUET, SUMMARY, TABLE
from ..tracking.runs import OneLineError

MANIFEST = "controls.json"
STAGES = ("stage0", "stage1", "stage2")


@dataclass
class Manifest:
    """One seed's study: run dirs (absolute) by role, and what every run's summary says."""
    root: Path
    design: int
    experts: dict[str, list[Path]]  # stage -> its experts, one per RL seed
    consolidations: dict[str, Path] = field(default_factory=dict)
    families: list[Path] = field(default_factory=list)
    families_opd: Path | None = None
    agentic: dict[str, Path] = field(default_factory=dict)  # stage -> its first expert under feedback turns
    summaries: dict[Path, dict] = field(default_factory=dict)
    # "<staged|families>/<own_teacher|random|no_gate|soup>" -> the run: what an OPD run is compared with
    opd_controls: dict[str, Path] = field(default_factory=dict)
    # role -> its run's revision, for the roles an amendment re-ran at another revision (read_manifest)
    amended: dict[str, str] = field(default_factory=dict)

    def role(self, name: str) -> Path | None:
        """The run of an amendable role: families_opd, a consolidation (opd, soup ...) or an OPD control
        (families/random ...)."""
        if name == "families_opd":
            return self.families_opd
        return self.consolidations.get(name) or self.opd_controls.get(name)

    def runs(self) -> list[Path]:
        named = [d for ds in self.experts.values() for d in ds] + list(self.consolidations.values())
        named += list(self.agentic.values()) + list(self.opd_controls.values())
        named += self.families + ([self.families_opd] if self.families_opd else [])
        return list(dict.fromkeys(named))

    @property
    def revision(self) -> str:
        return next(iter(self.summaries.values())).get("git_revision") or "unknown"

    @property
    def machine(self) -> str:
        return machine_of(next(iter(self.summaries.values())))

    def rl_seed(self, run: Path) -> int | None:
        return self.summaries[run].get("seed")

    def rl_seeds_distinct(self) -> bool:
        seeds = [self.rl_seed(d) for ds in self.experts.values() for d in ds]
        return len(set(seeds)) == len(seeds)


def machine_of(summary: dict) -> str:
    return summary.get("machine") or "unknown"


def relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


class StudyError(OneLineError):
    """Seed dirs that cannot be analysed as a study, said in one line (the study notebook shows it alone)."""


def find_seed_dirs(pattern: str) -> list[str]:
    """The study seed dirs (folders holding controls.json) a glob matches, sorted; StudyError (a
    ValueError) in one line when it matches none."""
    found = sorted(d for d in glob.glob(pattern) if (Path(d) / MANIFEST).is_file())
    if not found:
        raise StudyError(f"no study seed dir (a folder with {MANIFEST}) matches {pattern}; keep one with "
                         "python -m chorus.analyze study='[...]' study_keep=DIR, or point at analysis/studies/...")
    return found


def read_manifest(seed_dir: str | Path, amended: tuple[str, ...] = ()) -> Manifest:
    """The seed dir's controls.json, its run dirs resolved against the seed dir and every run's
    summary read; ValueError (one line) for a missing file or run, a run without results, or runs
    of mixed revisions or machine kinds. `amended`: roles (Manifest.role) a pre-registered amendment
    re-ran at another revision; their runs are left out of the revision check (not the machine
    check) and their revisions kept in `Manifest.amended`, so the study says so."""
    root = Path(seed_dir)
    path = root / MANIFEST
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: {str(exc).splitlines()[0]}; run python -m chorus.pipeline pipeline=study "
                         "(or give a seed dir kept by analyze study_keep=)") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: not a JSON object of run dirs by role")

    def where(d) -> Path:
        if not isinstance(d, str) or not d:
            raise ValueError(f"{path}: {d!r} is not a run dir")
        return Path(d) if Path(d).is_absolute() else root / d

    if raw.get("design") == 2:
        experts = raw.get("experts") or {}
        if sorted(experts) != sorted(STAGES) or any(not isinstance(v, list) or not v for v in experts.values()):
            raise ValueError(f"{path}: `experts` must give a list of run dirs for each of {list(STAGES)}")
        m = Manifest(root, 2, {s: [where(d) for d in experts[s]] for s in STAGES},
                     {k: where(v) for k, v in (raw.get("consolidations") or {}).items()},
                     [where(d) for d in raw.get("families") or []],
                     where(raw["families_opd"]) if raw.get("families_opd") else None,
                     {k: where(v) for k, v in (raw.get("agentic") or {}).items()},
                     opd_controls={k: where(v) for k, v in (raw.get("opd_controls") or {}).items()})
        kinds = CONTROLS + ("soup",)
        parts = {f"{p}/{k}" for p in ("staged", "families") for k in kinds}
        if set(m.opd_controls) - parts:
            raise ValueError(f"{path}: `opd_controls` names {sorted(set(m.opd_controls) - parts)}; use "
                             f"<staged|families>/<{'|'.join(kinds)}>")
        if set(m.agentic) - set(STAGES):
            raise ValueError(f"{path}: `agentic` names {sorted(set(m.agentic) - set(STAGES))}, not stages")
    elif "staged" in raw:  # v1: one expert per stage sharing the RL seed; stage2 repeated by same_stage
        staged = [where(d) for d in raw["staged"]]
        if len(staged) != len(STAGES):
            raise ValueError(f"{path}: `staged` names {len(staged)} runs, not one per stage {list(STAGES)}")
        experts = {s: [d] for s, d in zip(STAGES, staged)}
        same = [where(d) for d in raw.get("same_stage") or []]
        if same:
            stage = next((s for s, d in zip(STAGES, staged) if d == same[0]), None)
            if stage is None:
                raise ValueError(f"{path}: same_stage's first run is none of the staged experts")
            experts[stage] += same[1:]
        m = Manifest(root, 1, experts, {}, [where(d) for d in raw.get("families") or []],
                     where(raw["families_opd"]) if raw.get("families_opd") else None)
    else:
        raise ValueError(f"{path}: neither a v2 manifest (design: 2) nor a v1 one (staged: [...])")
    named = [d for ds in m.experts.values() for d in ds] + m.families
    twice = next((d for i, d in enumerate(named) if d in named[:i]), None)
    if twice is not None:  # one run counted as two experts would fake agreement between them
        raise ValueError(f"{path}: run {twice} is named twice among the experts; each expert is its own run")
    for run in m.runs():
        m.summaries[run] = read_summary(run, path)
    roles = {name: m.role(name) for name in amended}
    if any(run is None for run in roles.values()):
        raise ValueError(f"{path}: study_amended names {[n for n, r in roles.items() if r is None]}, which this "
                         "seed does not run; use families_opd, a consolidation (opd, soup ...) or an OPD control")
    m.amended = {name: m.summaries[run].get("git_revision") or "unknown" for name, run in roles.items()}
    check_uniform({r: sm for r, sm in m.summaries.items() if r not in roles.values()}, path, keys=("git revision",))
    check_uniform(m.summaries, path, keys=("machine kind",))
    return m


def read_summary(run: Path, manifest: Path) -> dict:
    if not run.is_dir():
        raise ValueError(f"{manifest}: run {run} is missing; finish the pipeline or keep its evidence")
    if not ((run / PARQUET).exists() or (run / TABLE).exists()):
        raise ValueError(f"{manifest}: run {run} has no per-task table; finish the pipeline")
    try:
        return json.loads((run / SUMMARY).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{manifest}: run {run}: {SUMMARY}: {str(exc).splitlines()[0]}") from None


def check_uniform(summaries: dict[Path, dict], where, keys=("git revision", "machine kind")) -> None:
    """Refuse runs made at different git revisions or on different machine kinds (`keys`: which)."""
    for key, read in (("git revision", lambda s: s.get("git_revision") or "unknown"), ("machine kind", machine_of)):
        if key not in keys:
            continue
        values: dict[str, Path] = {}
        for run, s in summaries.items():
            values.setdefault(read(s), run)
        if len(values) > 1:
            (a, ra), (b, rb) = list(values.items())[:2]
            raise ValueError(f"{where}: runs of mixed {key}s ({ra.name}: {a}; {rb.name}: {b}); "
                             "a study's runs come from one revision on one machine kind")


def check_study(manifests: list[Manifest]) -> None:
    """Every seed at one revision on one machine kind, and of one study design (distinct seed dir names
    are study_verdict.analyse's check)."""
    check_uniform({m.root: next(iter(m.summaries.values())) for m in manifests}, "study")  # named by seed dir
    designs = {m.design for m in manifests}
    if len(designs) > 1:
        raise ValueError(f"study: seed dirs mix study designs {sorted(designs)}; analyse v1 and v2 separately")


def write_manifest(runs_dir: str | Path, experts: dict[str, list[Path]], consolidations: dict[str, Path],
                   families: list[Path] = (), families_opd: Path | None = None,
                   agentic: dict[str, Path] | None = None, opd_controls: dict[str, Path] | None = None) -> Path:
    """controls.json for a crossed study seed, run dirs relative to runs_dir (the folder can move)."""
    root = Path(runs_dir)
    body = {"design": 2, "experts": {s: [relative(Path(d), root) for d in ds] for s, ds in experts.items()},
            "consolidations": {k: relative(Path(v), root) for k, v in consolidations.items()}}
    if families:
        body["families"] = [relative(Path(d), root) for d in families]
    if families_opd:
        body["families_opd"] = relative(Path(families_opd), root)
    if agentic:
        body["agentic"] = {k: relative(Path(v), root) for k, v in agentic.items()}
    if opd_controls:
        body["opd_controls"] = {k: relative(Path(v), root) for k, v in opd_controls.items()}
    path = root / MANIFEST
    path.write_text(json.dumps(body, indent=1))
    return path


def keep_evidence(seed_dir: str | Path, dest: str | Path, amended: tuple[str, ...] = ()) -> list[Path]:
    """Copy what the study reads from one seed's dir into dest: the manifest and, for each run it
    names, summary.json and the per-task table (no checkpoints, no samples' text: a few hundred KB
    a seed, small enough to commit). The copy is checked as the original is (read_manifest), and
    `analyze study=[dest,...]` gives the same numbers. Returns the files written."""
    import shutil

    m = read_manifest(seed_dir, amended)
    root, dest = m.root.resolve(), Path(dest)
    rel = {}
    for run in m.runs():
        try:
            rel[run] = run.resolve().relative_to(root)
        except ValueError:
            raise ValueError(f"{m.root / MANIFEST} names run {run} outside {m.root}; keep runs under it") from None
    written = []
    for run, r in rel.items():
        files = [SUMMARY, PARQUET if (run / PARQUET).exists() else TABLE]  # the table read_table reads
        (dest / r).mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copyfile(run / f, dest / r / f)
            written.append(dest / r / f)
    shutil.copyfile(m.root / MANIFEST, dest / MANIFEST)  # its paths are relative to the seed dir, as here
    raw = json.loads((dest / MANIFEST).read_text())
    if any(Path(d).is_absolute() for d in _named(raw)):
        raise ValueError(f"{m.root / MANIFEST} names runs by absolute paths; write them relative to the seed dir")
    read_manifest(dest, amended)
    return [*written, dest / MANIFEST]


def _named(raw: dict) -> list[str]:
    out = []
    for v in raw.values():
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, list):
            out += [d for d in v if isinstance(d, str)]
        elif isinstance(v, dict):
            out += _named(v)
    return out
