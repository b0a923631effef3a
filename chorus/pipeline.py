"""python -m chorus.pipeline [pipeline=tiny|smoke] [seed=N] [runs_dir=DIR] [jobs=2]
    [checkpoints.stage0=PATH checkpoints.stage1=PATH checkpoints.stage2=PATH] [extra='["trainer=gpu",...]']

CHORUS end to end by chaining the existing jobs: SFT stages 0-2 (`chorus.train job=sft`), a DAPO
expert per stage (`job=rl`, each evaluated on the held-out tasks), the merges and reward-gated OPD
over the three experts (`consolidation=...`), then the analysis (oracle union, gap recovery, routing)
into <runs_dir>/REPORT.md with its plots. Each step is its own run dir; a step whose results exist is
skipped, so re-running the command resumes.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import hydra
from hydra import compose
from omegaconf import DictConfig, OmegaConf

from .config_schema import CONF_DIR, register_configs

register_configs()
STAGES = ("stage0", "stage1", "stage2")


def plan(c: dict) -> list:
    """The pipeline's steps; each one's overrides are composed now, so a bad one fails before anything runs."""
    from .train import auto_job, run_dir
    from .workflow.steps import Step

    p, ext = c["pipeline"], {k: v for k, v in (c["checkpoints"] or {}).items() if v}
    unknown = sorted(set(p["stages"]) - set(STAGES))
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown} in pipeline.stages; use {list(STAGES)}")
    common = [f"runs_dir={c['runs_dir']}", f"seed={c['seed']}", *p["train"], *c["extra"]]

    def step(name: str, overrides: list[str], after: list[str]) -> Step:
        try:
            job_cfg = OmegaConf.to_container(compose(config_name="train", overrides=common + overrides), resolve=True)
        except Exception as exc:  # Hydra's and OmegaConf's errors name the bad override
            raise ValueError(f"step {name}: {str(exc).splitlines()[0]}") from None
        return Step(name, "chorus.train", common + overrides, run_dir(job_cfg, auto_job(job_cfg)), after)

    def stage_checkpoint(stage: str) -> list[str]:
        return [f"sft_stage.checkpoint={ext[stage]}"] if stage in ext else []

    steps, prev = [], None
    for stage in STAGES:
        steps.append(step(f"sft/{stage}", ["job=sft", f"sft_stage={stage}", *p["stages"].get(stage, []),
                                           *stage_checkpoint(stage)], [prev] if prev and stage not in ext else []))
        prev = f"sft/{stage}"
    for stage in STAGES:
        steps.append(step(f"rl/{stage}", ["job=rl", f"sft_stage={stage}", *p["rl"], *stage_checkpoint(stage)],
                          [f"sft/{stage}"]))
    experts = [f"rl/{s}" for s in STAGES]
    base = [f"teacher_pool.base={ext['stage0']}"] if "stage0" in ext else []
    for method in p["merges"]:
        steps.append(step(f"consolidation/{method}", [f"consolidation={method}", *base, *p["merge"]], experts))
    steps.append(step("consolidation/opd", ["consolidation=opd", *base, *p["opd"]], experts))
    return steps


def prepare(c: dict) -> None:
    """Build the tiny model and tokenizer once (cached) before jobs that load it run side by side."""
    job_cfg = OmegaConf.to_container(compose(config_name="train", overrides=c["pipeline"]["train"] + c["extra"]),
                                     resolve=True)
    model = job_cfg["model"]
    if model["name"] == "tiny" and not model["path"]:
        from .policy.tiny import build_tiny

        build_tiny(model["size"], seed=model["seed"])


@hydra.main(config_path=str(CONF_DIR), config_name="pipeline", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from .analysis.report import write_report
    from .workflow.runner import StepFailed, run_steps
    from .workflow.steps import write_record

    c = OmegaConf.to_container(cfg, resolve=True)
    runs_dir, start = Path(c["runs_dir"]), time.time()
    try:
        steps = plan(c)
        prepare(c)
        records = run_steps(steps, runs_dir / "pipeline", jobs=c["jobs"], env={"OMP_NUM_THREADS": str(c["threads"])})
        write_record(runs_dir / "pipeline" / "steps.json", records)
        report = write_report(runs_dir, runs_dir, records, title=f"CHORUS pipeline `{c['pipeline']['name']}`, "
                              f"seed {c['seed']}", k=c["pipeline"]["k"], n_boot=c["pipeline"]["bootstrap"],
                              seed=c["seed"], pass_coverage=c["pipeline"]["pass_coverage"])
    except (ValueError, OSError, StepFailed) as exc:
        print(f"chorus.pipeline: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        sys.exit(2)
    print(report["markdown"])
    ran = sum(r["status"] == "done" for r in records)
    print(f"\n{ran} steps run, {len(records) - ran} skipped (done) in {(time.time() - start) / 60:.1f} min "
          f"-> {report['path']}")


if __name__ == "__main__":
    main()
