"""python -m chorus.pipeline [pipeline=staged|study|tiny|smoke] [seed=N] [runs_dir=DIR] [jobs=2] [pipeline.launcher=submitit]
    [checkpoints.stage0=PATH checkpoints.stage1=PATH checkpoints.stage2=PATH] [extra='["trainer=gpu",...]']

CHORUS end to end by chaining the existing jobs: SFT stages 0-2 (`chorus.train job=sft`), DAPO
experts per stage (`job=rl`, each evaluated on the held-out tasks; pipeline.controls.rl_seeds of them,
every expert with its own RL seed), the merges and reward-gated OPD over the first expert of every
stage (`consolidation=...`), then the analysis (oracle union, gap recovery, routing) into
<runs_dir>/REPORT.md with its plots. Each step is its own run dir, named by its configuration
(see chorus.train); a step whose dir holds results made with exactly its planned settings is
skipped, so re-running the command resumes, and a changed setting re-runs the steps it reaches.
pipeline.launcher=submitit submits each step as a submitit job (SLURM: pipeline.submitit.*) instead
of running it here; `jobs` steps at most are submitted at once.
"""
from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import hydra
from hydra import compose
from omegaconf import DictConfig

from .config.schema import CONF_DIR, register_configs

register_configs()
STAGES = ("stage0", "stage1", "stage2")
EXPERT = re.compile(r"rl/(stage\d+)(?:-rl(\d+))?")  # an expert step's name: its stage, its replicate (none: 0)


def expert_name(stage: str, j: int) -> str:
    """Replicate 0 keeps the plain name and an untagged run dir (what teacher_pool.from_runs looks for);
    the others are tagged rl<j>, variants of their stage's expert."""
    return f"rl/{stage}" + (f"-rl{j}" if j else "")


def rl_seed(seed: int, i: int, j: int) -> int:
    """Stage i's replicate j: every expert of a pipeline seed its own RL seed (task order, sampling), so
    stage is never confounded with RL seed (v1's staged experts all shared `seed`). Replicate 0's seed
    does not depend on how many replicates there are, so pipeline=study reuses pipeline=staged's
    experts (and everything built from them) in the same runs_dir."""
    return seed + 1000 * (i + len(STAGES) * j)


def in_report(name: str) -> bool:
    """REPORT.md's table keeps to one expert per stage and what is built from them; the other
    replicates and the control/ steps go to its Controls section."""
    m = EXPERT.fullmatch(name)
    return not name.startswith(("control/", "evaluate/", "tables/")) and not (m and m.group(2))


def plan(c: dict) -> list:
    """The pipeline's steps, each composed now (so a bad setting fails before anything runs) with the
    run dir its configuration determines. Steps are wired by those dirs: a stage starts from the
    planned dir of the stage before it, an expert from its stage's, the consolidations from the
    experts', so a changed setting gives new dirs to its step and to every step downstream of it.
    The preset's and `extra` settings reach only the jobs that read them; one no job reads is refused."""
    from .config.job_settings import is_used, override_key, unused_overrides, used_settings
    from .train import auto_job, container, job_label, job_run_dir
    from .workflow.steps import Step

    p, ext = c["pipeline"], {k: v for k, v in (c["checkpoints"] or {}).items() if v}
    unknown = sorted(set(p["stages"]) - set(STAGES))
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown} in pipeline.stages; use {list(STAGES)}")
    base, train, extra = [f"runs_dir={c['runs_dir']}", f"seed={c['seed']}"], list(p["train"]), list(c["extra"])
    shared = [*train, *extra]
    reached: set[str] = set()

    def compose_step(name: str, overrides: list[str]) -> dict:
        try:
            return container(compose(config_name="train", overrides=overrides))
        except Exception as exc:  # Hydra's and OmegaConf's errors name the bad override
            raise ValueError(f"step {name}: {str(exc).splitlines()[0]}") from None

    def step(name: str, own: list[str], after: list[str], wiring: list[str] = ()) -> Step:
        """`own`: the preset's settings of this step (its stage's, rl's, opd's ...); `wiring`: what the
        plan itself sets (the job, the checkpoints it starts from, seeds and tags of controls). Later
        overrides win in Hydra, so the order is the precedence: the preset's train, the step's own
        preset settings, then the user's `extra` (extra wins over any preset, as documented), and the
        wiring last (no setting can detach a step from the steps it is planned after)."""
        own, wiring = list(own), list(wiring)
        full = compose_step(name, base + train + own + extra + wiring)
        job = auto_job(full)
        uses = used_settings(job, full)
        routed_train, routed_extra = ([o for o in group if is_used(override_key(o), uses)] for group in (train, extra))
        reached.update(routed_train + routed_extra)
        overrides = base + routed_train + own + routed_extra + wiring
        job_cfg = compose_step(name, overrides)
        ignored = unused_overrides(job, job_cfg, own + wiring)
        if ignored:
            raise ValueError(f"step {name}: {job_label(job, job_cfg)} does not use {ignored[0]}; remove it from the preset")
        out, record = job_run_dir(job_cfg, job)
        owns[name] = (own, wiring)
        return Step(name, "chorus.train", overrides, out, after, identity=record["identity"],
                    changed=record["changed"])

    steps: dict[str, Step] = {}
    owns: dict[str, tuple] = {}  # each step's (own preset settings, wiring): without the shared ones

    def student_of(student: str, soup: Step | None) -> tuple[str | None, list[str]]:
        """OPD's student (consolidation.student as composed) as the plan wires it: the soup step's
        checkpoint when it names soup (and the plan has that soup), a stage's planned checkpoint, else
        the preset's own choice (None); with the steps it waits for."""
        if student == "soup" and soup is not None:
            return str(soup.run_dir / "hf"), [soup.name]
        if student in STAGES:
            return checkpoint_of(student), [f"sft/{student}"] if student not in ext else []
        return None, []

    def consolidation_step(name: str, method: str, preset: list[str], experts: dict, tag: str = "",
                           soup: Step | None = None, tables: dict | None = None, routing: str | None = None) -> Step:
        """method over `experts` (teacher name -> its step), the pool's teachers pointed at their planned
        checkpoints in order (and renamed where the names differ from the pool's). OPD's student is
        student_of's (so OPD and its controls start from the very same weights); its teachers' rewards
        come from `tables` (teacher name -> its table step), their missing tasks estimated online;
        `routing` sets consolidation.routing (a control's)."""
        wiring = [f"consolidation={method}", *([f"run_tag={tag}"] if tag else [])]
        after = [e.name for e in experts.values()]
        if routing:
            wiring.append(f"consolidation.routing={routing}")
        composed = compose_step(name, base + train + list(preset) + extra + wiring)
        if method == "opd":
            student, needs = student_of(composed["consolidation"]["student"], soup)
            if student:
                wiring.append(f"consolidation.student={student}")
                after += needs
        pool = composed["teacher_pool"]["teachers"]
        if len(pool) != len(experts):
            raise ValueError(f"step {name}: teacher_pool has {len(pool)} teachers for {len(experts)} experts")
        for i, (teacher, (expert, source)) in enumerate(zip(pool, experts.items())):
            wiring.append(f"teacher_pool.teachers.{i}.checkpoint={source.run_dir / 'hf'}")
            if teacher["name"] != expert:
                wiring.append(f"teacher_pool.teachers.{i}.name={expert}")
            if method == "opd" and tables:
                wiring += [f"teacher_pool.teachers.{i}.source=table",
                           f"teacher_pool.teachers.{i}.rewards={tables[expert].run_dir}"]
                after.append(tables[expert].name)
        if method == "opd" and tables:
            wiring.append("teacher_pool.missing=online")
        if method != "soup":
            wiring.append(f"teacher_pool.base={checkpoint_of('stage0')}")
        return step(name, preset, after, wiring)

    def teacher_tables(experts: dict, prefix: str) -> dict:
        """Each expert's reward table for OPD's gate (pipeline.teacher_samples per training task); none
        when it is 0 (OPD estimates online)."""
        n = p["teacher_samples"]
        return {name: teacher_table(expert, compose_step, c["runs_dir"], f"tables/{prefix}{name}", n)
                for name, expert in experts.items()} if n else {}

    def opd_controls(kinds: list[str], opd_name: str, preset: list[str], experts: dict, tag: str,
                     soup: Step | None, tables: dict) -> list:
        """OPD's controls, each differing from `opd_name` in one thing: own_teacher (the same student
        trained as long on the same tasks by DAPO, its own samples' rewards instead of teachers; no
        refills, so it draws as many samples), random (a random teacher where the gate routes), no_gate
        (the best teacher for every task)."""
        out = []
        for kind in kinds:
            name = f"{opd_name}-{kind}"
            if kind == "own_teacher":
                composed = compose_step(name, base + train + list(preset) + extra + ["consolidation=opd"])
                student, needs = student_of(composed["consolidation"]["student"], soup)
                if student is None:
                    raise ValueError(f"step {name}: the own-teacher control needs OPD's student to be soup or a "
                                     "stage (consolidation.student)")
                out.append(step(name, [o for o in preset if override_key(o).startswith("rl.")], needs,
                                ["job=rl", "sft_stage=stage0", f"sft_stage.checkpoint={student}",
                                 "rl_algo.max_refills=0", f"run_tag={tag}_{kind}" if tag else f"run_tag={kind}"]))
            elif kind in ("random", "no_gate"):
                out.append(consolidation_step(name, "opd", preset, experts, tag=f"{tag}_{kind}" if tag else kind, soup=soup,
                                              tables=tables, routing=kind))
            else:
                raise ValueError(f"pipeline.controls: unknown OPD control {kind!r}; use own_teacher, random or no_gate")
        return out

    def checkpoint_of(stage: str) -> str:  # what a stage hands on: the real checkpoint, else its planned dir
        return ext.get(stage) or str(steps[f"sft/{stage}"].run_dir / "hf")

    prev = None
    for stage in STAGES:
        wiring = ["job=sft", f"sft_stage={stage}"]
        if stage in ext:
            wiring.append(f"sft_stage.checkpoint={ext[stage]}")
        elif prev:
            wiring.append(f"sft_stage.init={checkpoint_of(prev)}")
        steps[f"sft/{stage}"] = step(f"sft/{stage}", p["stages"].get(stage, []),
                                     [f"sft/{prev}"] if prev and stage not in ext else [], wiring)
        prev = stage
    n_rl = p["controls"]["rl_seeds"]
    if n_rl < 1:
        raise ValueError(f"pipeline.controls.rl_seeds={n_rl}: set it to 1 or more (DAPO experts per SFT stage)")
    for i, stage in enumerate(STAGES):
        for j in range(n_rl):  # the wiring sets the RL seed, so no preset or extra can make two experts share it
            name = expert_name(stage, j)
            steps[name] = step(name, p["rl"], [f"sft/{stage}"],
                               ["job=rl", f"sft_stage={stage}", f"sft_stage.checkpoint={checkpoint_of(stage)}",
                                f"seed={rl_seed(c['seed'], i, j)}", *([f"run_tag=rl{j}"] if j else [])])
    experts = {s: steps[expert_name(s, 0)] for s in STAGES}
    tables = teacher_tables(experts, "")
    steps.update({t.name: t for t in tables.values()})
    for method, preset in [*[(m, p["merge"]) for m in p["merges"]], ("opd", p["opd"])]:
        steps[f"consolidation/{method}"] = consolidation_step(f"consolidation/{method}", method, preset, experts,
                                                              soup=steps.get("consolidation/soup"), tables=tables)
    for s in opd_controls(p["controls"]["staged_opd_controls"], "control/opd", p["opd"], experts, "",
                          steps.get("consolidation/soup"), tables):
        steps[s.name] = s
    if p["controls"]["families"] and "stage0" in ext:
        raise ValueError("pipeline.controls.families fine-tunes the base as stage 0 does; it cannot run with "
                         "checkpoints.stage0 (an external stage 0)")
    for s in control_steps(p["controls"], p["opd"], p["merge"], step, consolidation_step, owns, checkpoint_of("stage0"),
                           teacher_tables, opd_controls):
        steps[s.name] = s
    steps["baseline/random"] = held_out_evaluation(
        steps["rl/stage0"], compose_step, c["runs_dir"], "baseline/random", ["policy=random", f"policy.seed={c['seed']}"])
    rounds = p["controls"]["agentic_rounds"]
    if rounds < 0:
        raise ValueError(f"pipeline.controls.agentic_rounds={rounds}: set 0 (none) or the feedback turns to give")
    for stage, expert in experts.items() if rounds else ():  # the secondary protocol: feedback turns
        steps[f"evaluate/agentic/{stage}"] = held_out_evaluation(
            expert, compose_step, c["runs_dir"], f"evaluate/agentic/{stage}",
            ["policy=model", "model=hf", f"model.path={expert.run_dir / 'hf'}", "protocol=agentic",
             f"protocol.rounds={rounds}"], sampled=True)
    unread = [o for o in shared if o not in reached]
    if unread:
        raise ValueError(f"no step of the pipeline reads {unread[0]}; remove it from extra (or the preset's train)")
    return list(steps.values())


def control_steps(ctl: dict, opd: list[str], merge: list[str], step, consolidation_step, owns: dict,
                  stage0: str, teacher_tables, opd_controls) -> list:
    """The study's positive control (pipeline.controls.families), planned from the pipeline's own steps:
    per family group a fine-tune of the stage-0 SFT checkpoint `stage0` on that group's designs only
    (stage 0's settings, then controls.family_sft), each made an expert by stage 0's DAPO procedure (its
    RL seed too); their soup, and OPD over them (the pipeline's OPD settings, then controls.opd) with
    its controls (controls.opd_controls). Step
    names start with control/. (The negative control, one stage's experts at other RL seeds, is the
    experts' own replicates: controls.rl_seeds.)"""
    out = []
    groups = ctl["families"]
    if groups:
        flat = [f for g in groups for f in g]
        if len(groups) < 2 or len(set(flat)) != len(flat) or not all(groups):
            raise ValueError(f"pipeline.controls.families={groups} must be >= 2 disjoint, non-empty family groups")
        experts = {}
        for i, group in enumerate(groups):
            own, wiring = owns["sft/stage0"]
            # forked from stage 0, so the family experts share a lineage and their soup is a competent
            # student (OPD's "new student"); every skill of its families: complementarity by construction
            sft = step(f"control/families/sft{i}", [*own, *ctl["family_sft"]], ["sft/stage0"],
                       [*wiring, f"sft_stage.init={stage0}", f"sft_stage.tasks.families=[{','.join(group)}]",
                        "sft_stage.skills=null", f"run_tag=fam{i}"])
            own, wiring = owns["rl/stage0"]
            wiring = [o for o in wiring if not o.startswith("sft_stage.checkpoint=")]
            experts[f"fam{i}"] = step(f"control/families/rl{i}", own, [sft.name],
                                      [*wiring, f"sft_stage.checkpoint={sft.run_dir / 'hf'}", f"run_tag=fam{i}"])
            out += [sft, experts[f"fam{i}"]]
        preset = [*opd, *ctl["opd"]]
        pool = [o for o in preset if o.startswith("teacher_pool=")]  # OPD's pool size is the soup's too
        soup = consolidation_step("control/families/soup", "soup", [*merge, *pool[-1:]], experts, tag="families")
        tables = teacher_tables(experts, "families/")
        out += [soup, *tables.values(), consolidation_step("control/families/opd", "opd", preset, experts, tag="families", soup=soup,
                                         tables=tables),
                *opd_controls(ctl["opd_controls"], "control/families/opd", preset, experts, "families", soup, tables)]
    return out


def held_out_evaluation(expert, compose_step, runs_dir: str, name: str, policy: list[str], sampled: bool = False):
    """A chorus.evaluate step on the expert's held-out tasks, with its samples per task, format and pass
    rule (and, `sampled`, its evaluation sampling: temperature, token budgets, prompts a generate
    call), the policy given by `policy` overrides: uniform random stimulus (the row every trained
    model is read against) or a checkpoint under another protocol. Its dir is <name>-<hash of its overrides>, so changed held-out
    tasks never reuse old results."""
    return _evaluation_step(expert, compose_step, runs_dir, name, policy, "eval_tasks", None,
                            "eval_temperature" if sampled else None)


def teacher_table(expert, compose_step, runs_dir: str, name: str, samples: int):
    """A chorus.evaluate step scoring the expert on its own training tasks (rl.tasks), `samples` per task
    at the training sampling (rl.temperature, as OPD's student samples them): the per-task table OPD's
    gate reads. Never on the validation or test split."""
    return _evaluation_step(expert, compose_step, runs_dir, name,
                            ["policy=model", "model=hf", f"model.path={expert.run_dir / 'hf'}"], "tasks", samples,
                            "temperature")


def _evaluation_step(expert, compose_step, runs_dir: str, name: str, policy: list[str], tasks_key: str,
                     samples: int | None, temperature_key: str | None):
    """A chorus.evaluate step of `policy` on the expert's rl.<tasks_key> with its format and pass rule,
    `samples` per task (None: its rl.eval_samples); with `temperature_key`, sampled as the expert's
    rl.<temperature_key> with its token budgets and prompts a generate call, after the expert. Its dir
    is <name>-<hash of its overrides>."""
    import hashlib

    from .workflow.steps import Step

    c = compose_step(expert.name, expert.overrides)
    rl = c["rl"]
    tasks = {k: v for k, v in rl[tasks_key].items() if v is not None}
    overrides = [*policy, f"tasks={tasks.pop('name')}",
                 *(f"tasks.{k}={_value(v)}" for k, v in sorted(tasks.items())), f"format={c['format']['name']}",
                 f"n_samples={rl['eval_samples'] if samples is None else samples}", "progress=false",
                 *([f"policy.temperature={rl[temperature_key]}", f"policy.max_new_tokens={rl['max_new_tokens']}",
                    f"policy.max_prompt_tokens={rl['max_prompt_tokens']}",
                    f"protocol.batch_tasks={rl['prompts_per_generate']}"] if temperature_key else []),
                 *([f"pass_coverage={c['pass_coverage']}"] if c["pass_coverage"] is not None else []),
                 f"logger={c['logger']['name']}"]
    digest = hashlib.sha256("\n".join(overrides).encode()).hexdigest()[:8]
    head, _, tail = name.rpartition("/")
    return Step(name, "chorus.evaluate", overrides, Path(runs_dir) / head / f"{tail}-{digest}",
                results_in_hydra_dir=True, after=[expert.name] if temperature_key else [])


def _value(v) -> str:
    """A composed value as a Hydra override's value (lists as [a,b])."""
    return "[" + ",".join(map(str, v)) + "]" if isinstance(v, list) else str(v)


def write_study(steps: list, runs_dir: Path) -> str:
    """controls.json (the v2 manifest: each stage's experts in replicate order, the consolidations over
    the first ones, the families control) for a plan with controls, and REPORT.md's Controls section."""
    from .analysis.study_manifest import write_manifest

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
    from .analysis.study_manifest import read_manifest
    from .tracking.run_dir import SUMMARY

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
    from .workflow.runner import StepFailed, run_steps

    c = container(cfg)
    runs_dir, start = Path(c["runs_dir"]), time.time()
    try:
        launcher = make_launcher(c["pipeline"]["launcher"], c["pipeline"]["submitit"])  # before the plan's minute
        steps = plan(c)
        quiet_third_party()
        base = prepare(steps)
        records = run_steps(steps, runs_dir / "pipeline", jobs=c["jobs"], env={"OMP_NUM_THREADS": str(c["threads"])},
                            launcher=launcher)
        # the report covers exactly this plan's runs, whatever else runs_dir holds; the controls end it
        main_steps = [s for s in steps if in_report(s.name)]
        controls = write_study(steps, runs_dir) if len(main_steps) < len(steps) else ""
        report = write_report([s.run_dir for s in main_steps], runs_dir,
                              [base] * (base is not None) + records,  # every step's time, the controls' too
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
