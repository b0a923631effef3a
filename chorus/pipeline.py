"""python -m chorus.pipeline [pipeline=staged|study|tiny|smoke|own_designs] [seed=N] [runs_dir=DIR] [jobs=2]
    [pipeline.launcher=submitit] [checkpoints.stage0=PATH checkpoints.stage1=PATH checkpoints.stage2=PATH]
    [designs=FOLDER] [extra='["trainer=gpu",...]']

CHORUS end to end by chaining the existing jobs: SFT stages 0-2 (`chorus.train job=sft`), DAPO
experts per stage (`job=rl`, each evaluated on the held-out tasks; pipeline.controls.rl_seeds of them,
every expert with its own RL seed), the merges and reward-gated OPD over the first expert of every
stage (`consolidation=...`), then the analysis (oracle union, gap recovery, routing) into
<runs_dir>/REPORT.md with its plots. Each step is its own run dir, named by its configuration
(see chorus.train); a step whose dir holds results made with exactly its planned settings is
skipped, so re-running the command resumes, and a changed setting re-runs the steps it reaches.
pipeline.launcher=submitit submits each step as a submitit job (SLURM: pipeline.submitit.*) instead
of running it here; `jobs` steps at most are submitted at once. designs=<folder> ingests your own
designs first (chorus.ingest) and runs every step on them: training on their train split, every
evaluation on their test split (pipeline=own_designs is the preset for it).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import hydra
from hydra import compose
from omegaconf import DictConfig

from .config.schema import CONF_DIR, register_configs

register_configs()


def plan(c: dict) -> list:
    """The pipeline's steps (chorus.workflow.plan), each chorus.train step composed here by Hydra."""
    from .train import container
    from .workflow.plan import plan as plan_steps

    return plan_steps(c, lambda overrides: container(compose(config_name="train", overrides=overrides)))


def plan_memory(steps: list) -> None:
    """Every training step's memory plan (chorus.train's, with rl.micro_batch=null sized), before any
    step runs: the first that does not fit is refused in one line that names it and the setting to
    change. A step whose starting checkpoint does not exist yet is planned for the model's own
    architecture (the stages, experts and students all have it)."""
    from omegaconf import OmegaConf

    from .policy.models import resolve_path
    from .train import checked_job, memory_plan, planned_policy

    for step in (s for s in steps if s.module == "chorus.train"):
        cfg = compose(config_name="train", overrides=step.overrides)
        c, job = checked_job(cfg, step.overrides)
        conf = OmegaConf.to_object(cfg)
        try:
            policy = planned_policy(job, c, conf)
        except ValueError:  # a planned stage dir that is not there yet
            policy = None
        if not policy or not (Path(policy) / "config.json").exists():
            policy = resolve_path(**c["model"])
        try:
            memory_plan(job, c, conf, policy)
        except ValueError as exc:
            raise ValueError(f"step {step.name}: {str(exc).splitlines()[0]}") from exc


def check_teachers(steps: list) -> None:
    """Every SFT stage's teacher (sft_stage.candidates has teacher) reachable, or its checkpoint there,
    before any step runs: one line naming the step otherwise."""
    from .sft.teacher import check_teacher
    from .train import container

    for step in (s for s in steps if s.name.startswith("sft/")):
        stage = container(compose(config_name="train", overrides=step.overrides))["sft_stage"]
        if "teacher" in stage["candidates"] and not stage["checkpoint"]:
            try:
                check_teacher(stage["teacher"])
            except (ValueError, OSError) as exc:
                raise ValueError(f"step {step.name}: {str(exc).splitlines()[0]}") from None


def prepare(steps: list) -> dict | None:
    """Build the tiny model and tokenizer once (cached) before jobs that load it run side by side;
    a step record for the time table (None without a tiny base)."""
    from .train import container

    model = container(compose(config_name="train", overrides=steps[0].overrides))["model"]
    if model["name"] == "tiny" and not model["path"]:
        from .policy.tiny import READY, build_tiny

        start = time.time()
        path = build_tiny(model["size"], seed=model["seed"], pretrain_steps=model["pretrain_steps"])
        took, built = time.time() - start, (path / READY).stat().st_mtime >= start  # marked ready just now
        return {"name": "base (tiny, built once, cached)", "status": "built" if built else "cached",
                "seconds": round(took, 1), "run_dir": str(path), "started": round(start, 1),
                "ended": round(start + took, 1)}
    return None


@hydra.main(config_path=str(CONF_DIR), config_name="pipeline", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from .analysis.report import write_report
    from .tracking.quiet import quiet_third_party
    from .train import container
    from .workflow.launchers import make_launcher
    from .workflow.plan import in_report
    from .workflow.runner import StepFailed, run_steps
    from .workflow.study_record import write_study

    c = container(cfg)
    runs_dir, start = Path(c["runs_dir"]), time.time()
    try:
        launcher = make_launcher(c["pipeline"]["launcher"], c["pipeline"]["submitit"])  # before the plan's minute
        ingested = None
        if c["pipeline"]["designs"] and not c["designs"]:
            raise ValueError(f"pipeline={c['pipeline']['name']} runs on your own designs: pass designs=<folder> "
                             "(e.g. designs=examples/designs)")
        if c["designs"]:  # the task file the plan's steps read, named by its content
            from .workflow.own_designs import ingest_designs

            tasks, ingested = ingest_designs(c)
            c["pipeline"]["train"] = [*c["pipeline"]["train"], *tasks]
        steps = plan(c)
        check_teachers(steps)
        quiet_third_party()
        base = prepare(steps)
        plan_memory(steps)  # after prepare: the tiny model's architecture is then on disk
        records = run_steps(steps, runs_dir / "pipeline", jobs=c["jobs"], env={"OMP_NUM_THREADS": str(c["threads"])},
                            launcher=launcher)
        # the report covers exactly this plan's runs, whatever else runs_dir holds; the controls end it
        main_steps = [s for s in steps if in_report(s.name)]
        controls = write_study(steps, runs_dir) if len(main_steps) < len(steps) else ""
        report = write_report([s.run_dir for s in main_steps], runs_dir,
                              [r for r in (ingested, base) if r] + records,  # every step's time, the controls' too
                              title=f"CHORUS pipeline `{c['pipeline']['name']}`, seed {c['seed']}",
                              k=c["pipeline"]["k"], n_boot=c["pipeline"]["bootstrap"], seed=c["seed"],
                              appendix=controls + "\n" if controls else "",
                              diagnose={s.name: s.run_dir for s in steps if s.module == "chorus.train"})
    except (ValueError, OSError, StepFailed) as exc:
        print(f"chorus.pipeline: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        sys.exit(2)
    print(report["markdown"] + controls)
    ran = sum(r["status"] == "done" for r in records)
    print(f"\n{ran} steps run, {len(records) - ran} skipped (done) in {(time.time() - start) / 60:.1f} min "
          f"-> {report['path']}")


if __name__ == "__main__":
    main()
