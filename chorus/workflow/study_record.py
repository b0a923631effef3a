"""What a pipeline with controls leaves for the study: controls.json (the v2 manifest, read by
chorus.analysis.study_manifest) and REPORT.md's short Controls section."""
from __future__ import annotations

import json
import re
from pathlib import Path

from .plan import EXPERT, STAGES


def write_study(steps: list, runs_dir: Path) -> str:
    """controls.json (the v2 manifest: each stage's experts in replicate order, the consolidations over
    the first ones, the families control) for a plan with controls, and REPORT.md's Controls section."""
    from ..analysis.study_manifest import write_manifest

    by = {s.name: s.run_dir for s in steps}
    experts = {stage: [] for stage in STAGES}
    for s in steps:  # planned in replicate order
        m = EXPERT.fullmatch(s.name)
        if m:
            experts[m.group(1)].append(s.run_dir)
    write_manifest(runs_dir, experts, {n.split("/", 1)[1]: d for n, d in by.items() if n.startswith("consolidation/")},
                   [d for n, d in by.items() if n.startswith("control/families/rl")], by.get("control/families/opd"),
                   agentic={n.rsplit("/", 1)[1]: d for n, d in by.items() if n.startswith("evaluate/agentic/")},
                   opd_controls=opd_control_dirs(by))
    return study_section(runs_dir, experts)


def opd_control_dirs(by: dict) -> dict:
    """The manifest's opd_controls: each OPD control's run dir by its part (staged|families/<kind>)."""
    out = {}
    for name, d in by.items():
        m = re.fullmatch(r"control/(?:(families)/)?opd-(\w+)", name)
        if m:
            out[f"{m.group(1) or 'staged'}/{m.group(2)}"] = d
    if "control/families/soup" in by:
        out["families/soup"] = by["control/families/soup"]
    return out


def study_section(runs_dir: Path, experts: dict) -> str:
    """A short Controls section: every expert's Pass@1 and RL seed from its summary.json. The study's
    statistics (over seeds) are chorus.analyze's; this only says what ran."""
    from ..analysis.study_manifest import read_manifest
    from ..tracking.run_dir import SUMMARY

    rows = ["| stage | RL seed | Pass@1 % | run |", "|---|---|---|---|"]
    for stage, runs in experts.items():
        for run in runs:
            try:
                s = json.loads((Path(run) / SUMMARY).read_text())
                rate, seed = f"{100 * s['pass_rate']:.1f}", s.get("seed")
            except (OSError, ValueError, KeyError, TypeError):
                rate, seed = "-", "-"
            rows.append(f"| {stage} | {seed} | {rate} | {Path(run).name} |")
    try:
        read_manifest(runs_dir)  # the study's reader: a missing run, mixed revisions or machine kinds are refused
        check = ""
    except ValueError as exc:  # said here, an hour before the analysis would say it
        check = f"\n\nThe study's reader (chorus.analysis.study_manifest) refuses this seed: {str(exc).splitlines()[0]}"
    return ("\n## Controls (pipeline.controls)\n\nEach SFT stage's DAPO experts, one per RL seed (held-out "
            "Pass@1; the table above has each stage's first). controls.json names them.\n\n" + "\n".join(rows)
            + f"\n\nThe study's statistics: python -m chorus.analyze study=[{runs_dir}] (every seed's runs_dir)"
            + check)
