"""The pipeline's plan: every step (SFT chain, DAPO experts, gate tables, consolidations, controls,
evaluations) as a command line with the run dir its configuration determines.

Steps are wired by those dirs: a stage starts from the planned dir of the stage before it, an expert
from its stage's, the consolidations from the experts', so a changed setting gives new dirs to its step
and to every step downstream of it. Each step is composed when planned (`compose`, given by the entry
point: a list of chorus.train overrides -> the composed config), so a bad setting fails before anything
runs. The preset's and `extra` settings reach only the jobs that read them; one no job reads is refused.
"""
from __future__ import annotations

import re

from .evaluation_steps import held_out_evaluation, teacher_table
from .steps import Step

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


def superseded_dropped(own: list[str], wiring: list[str]) -> list[str]:
    """A step's own preset settings without those a later one of them or the wiring sets again (Hydra
    keeps the last): its command line then shows each setting once, with the value it runs with (OPD's
    student was spelled three times: the preset's soup, the control's stage0, the wired checkpoint)."""
    from ..config.job_settings import override_key

    kept, later = [], {override_key(w) for w in wiring}
    for o in reversed(own):
        if override_key(o) not in later:
            kept.append(o)
        later.add(override_key(o))
    return kept[::-1]


def plan(c: dict, compose) -> list[Step]:
    """The steps of the pipeline configured by `c` (pipeline.yaml composed), in plan order."""
    return Planner(c, compose).plan()


class Planner:
    """Plans one pipeline: `steps` by name as they are planned, `owns` each step's own preset settings
    and wiring (without the shared ones), `reached` the shared settings some job reads."""

    def __init__(self, c: dict, compose):
        self.c, self.p, self.compose = c, c["pipeline"], compose
        self.ext = {k: v for k, v in (c["checkpoints"] or {}).items() if v}
        unknown = sorted(set(self.p["stages"]) - set(STAGES))
        if unknown:
            raise ValueError(f"unknown stage(s) {unknown} in pipeline.stages; use {list(STAGES)}")
        self.base = [f"runs_dir={c['runs_dir']}", f"seed={c['seed']}"]
        self.train, self.extra = list(self.p["train"]), list(c["extra"])
        self.steps: dict[str, Step] = {}
        self.owns: dict[str, tuple] = {}
        self.reached: set[str] = set()

    def plan(self) -> list[Step]:
        p = self.p
        self.sft_chain()
        experts = self.experts(p["controls"]["rl_seeds"])
        tables = self.teacher_tables(experts, "")
        self.add(*tables.values())
        for method, preset in [*[(m, p["merge"]) for m in p["merges"]], ("opd", p["opd"])]:
            self.add(self.consolidation_step(f"consolidation/{method}", method, preset, experts,
                                             soup=self.steps.get("consolidation/soup"), tables=tables))
        self.add(*self.opd_controls(p["controls"]["staged_opd_controls"], "control/opd", p["opd"], experts, "",
                                    self.steps.get("consolidation/soup"), tables))
        self.add(*self.families(p["controls"]))
        self.add(held_out_evaluation(self.steps["rl/stage0"], self.compose_step, self.c["runs_dir"], "baseline/random",
                                     ["policy=random", f"policy.seed={self.c['seed']}"]))
        self.add(*self.agentic(experts, p["controls"]["agentic_rounds"]))
        unread = [o for o in [*self.train, *self.extra] if o not in self.reached]
        if unread:
            raise ValueError(f"no step of the pipeline reads {unread[0]}; remove it from extra (or the preset's train)")
        return list(self.steps.values())

    def add(self, *steps: Step) -> None:
        self.steps.update({s.name: s for s in steps})

    def compose_step(self, name: str, overrides: list[str]) -> dict:
        try:
            return self.compose(overrides)
        except Exception as exc:  # Hydra's and OmegaConf's errors name the bad override
            raise ValueError(f"step {name}: {str(exc).splitlines()[0]}") from None

    def settable(self, name: str, own: list[str], wiring: list[str]) -> tuple[list[str], list[str]]:
        """The preset's train settings and the user's extra that this step's schema can take. Each
        consolidation method has a schema of its own: a setting of another method (consolidation.density
        beside an OPD step, or any beside an SFT step's consolidation=none) is not this step's to set, so
        it never reaches its composition; every other key does (a typo fails at the first step)."""
        from ..config.job_settings import has_setting, override_key

        probe = self.compose_step(name, self.base + list(own) + list(wiring))
        return tuple([o for o in group if not override_key(o).startswith("consolidation.")
                      or has_setting(probe, override_key(o))] for group in (self.train, self.extra))

    def step(self, name: str, own: list[str], after: list[str], wiring: list[str] = ()) -> Step:
        """A chorus.train step. `own`: the preset's settings of this step (its stage's, rl's, opd's ...);
        `wiring`: what the plan itself sets (the job, the checkpoints it starts from, seeds and tags of
        controls). Later overrides win in Hydra, so the order is the precedence: the preset's train, the
        step's own preset settings, then the user's `extra` (extra wins over any preset, as documented),
        and the wiring last (no setting can detach a step from the steps it is planned after)."""
        from ..config.job_settings import is_used, override_key, unused_overrides, used_settings
        from ..train import auto_job, job_label, job_run_dir

        wiring = list(wiring)
        own = superseded_dropped(list(own), wiring)
        train, extra = self.settable(name, own, wiring)
        full = self.compose_step(name, self.base + train + own + extra + wiring)
        job = auto_job(full)
        uses = used_settings(job, full)
        routed_train, routed_extra = ([o for o in group if is_used(override_key(o), uses)]
                                      for group in (train, extra))
        self.reached.update(routed_train + routed_extra)
        overrides = self.base + routed_train + own + routed_extra + wiring
        job_cfg = self.compose_step(name, overrides)
        ignored = unused_overrides(job, job_cfg, own + wiring)
        if ignored:
            raise ValueError(f"step {name}: {job_label(job, job_cfg)} does not use {ignored[0]}; "
                             "remove it from the preset")
        out, record = job_run_dir(job_cfg, job)
        self.owns[name] = (own, wiring)
        return Step(name, "chorus.train", overrides, out, after, identity=record["identity"],
                    changed=record["changed"])

    def checkpoint_of(self, stage: str) -> str:
        """What a stage hands on: the real checkpoint, else its planned dir."""
        return self.ext.get(stage) or str(self.steps[f"sft/{stage}"].run_dir / "hf")

    def sft_chain(self) -> None:
        prev = None
        for stage in STAGES:
            wiring = ["job=sft", f"sft_stage={stage}"]
            if stage in self.ext:
                wiring.append(f"sft_stage.checkpoint={self.ext[stage]}")
            elif prev:
                wiring.append(f"sft_stage.init={self.checkpoint_of(prev)}")
            self.add(self.step(f"sft/{stage}", self.p["stages"].get(stage, []),
                               [f"sft/{prev}"] if prev and stage not in self.ext else [], wiring))
            prev = stage

    def experts(self, n_rl: int) -> dict[str, Step]:
        """n_rl DAPO experts per stage; each stage's first, by stage (the merges', OPD's and the report's)."""
        if n_rl < 1:
            raise ValueError(f"pipeline.controls.rl_seeds={n_rl}: set it to 1 or more (DAPO experts per SFT stage)")
        for i, stage in enumerate(STAGES):
            for j in range(n_rl):  # the wiring sets the RL seed, so no preset or extra can make two experts share it
                name = expert_name(stage, j)
                self.add(self.step(name, self.p["rl"], [f"sft/{stage}"],
                                   ["job=rl", f"sft_stage={stage}", f"sft_stage.checkpoint={self.checkpoint_of(stage)}",
                                    f"seed={rl_seed(self.c['seed'], i, j)}", *([f"run_tag=rl{j}"] if j else [])]))
        return {s: self.steps[expert_name(s, 0)] for s in STAGES}

    def teacher_tables(self, experts: dict, prefix: str) -> dict:
        """Each expert's reward table for OPD's gate (pipeline.teacher_samples per training task); none
        when it is 0 (OPD estimates online)."""
        n = self.p["teacher_samples"]
        return {name: teacher_table(expert, self.compose_step, self.c["runs_dir"], f"tables/{prefix}{name}", n)
                for name, expert in experts.items()} if n else {}

    def student_of(self, student: str, soup: Step | None) -> tuple[str | None, list[str]]:
        """OPD's student (consolidation.student as composed) as the plan wires it: the soup step's
        checkpoint when it names soup (and the plan has that soup), a stage's planned checkpoint, else
        the preset's own choice (None); with the steps it waits for."""
        if student == "soup" and soup is not None:
            return str(soup.run_dir / "hf"), [soup.name]
        if student in STAGES:
            return self.checkpoint_of(student), [f"sft/{student}"] if student not in self.ext else []
        return None, []

    def consolidation_step(self, name: str, method: str, preset: list[str], experts: dict, tag: str = "",
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
        train, extra = self.settable(name, preset, wiring)
        composed = self.compose_step(name, self.base + train + list(preset) + extra + wiring)
        if method == "opd":
            student, needs = self.student_of(composed["consolidation"]["student"], soup)
            if student:
                wiring.append(f"consolidation.student={student}")
                after += needs
            reference = composed["consolidation"]["gate_reference"]
            if reference in STAGES:  # what DAPO from that stage reaches: its expert's gate table, planned first
                table = self.steps.get(f"tables/{reference}")
                if table is None:
                    raise ValueError(f"step {name}: consolidation.gate_reference={reference} needs that stage's "
                                     "expert table; set pipeline.teacher_samples > 0")
                wiring.append(f"consolidation.gate_reference={table.run_dir}")
                after.append(table.name)
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
            wiring.append(f"teacher_pool.base={self.checkpoint_of('stage0')}")
        return self.step(name, preset, after, wiring)

    def opd_controls(self, kinds: list[str], opd_name: str, preset: list[str], experts: dict, tag: str,
                     soup: Step | None, tables: dict) -> list[Step]:
        """OPD's controls, each differing from `opd_name` in one thing: own_teacher (the same student
        trained as long on the same tasks by DAPO, its own samples' rewards instead of teachers; no
        refills, so it draws as many samples), random (a random teacher where the gate routes), no_gate
        (the best teacher for every task)."""
        from ..config.job_settings import override_key
        from ..opd.routing import CONTROLS

        out = []
        for kind in kinds:
            name, kind_tag = f"{opd_name}-{kind}", f"{tag}_{kind}" if tag else kind
            if kind == "own_teacher":
                train, extra = self.settable(name, preset, ["consolidation=opd"])
                composed = self.compose_step(name, self.base + train + list(preset) + extra + ["consolidation=opd"])
                student, needs = self.student_of(composed["consolidation"]["student"], soup)
                if student is None:
                    raise ValueError(f"step {name}: the own-teacher control needs OPD's student to be soup or a "
                                     "stage (consolidation.student)")
                out.append(self.step(name, [o for o in preset if override_key(o).startswith("rl.")], needs,
                                     ["job=rl", "sft_stage=stage0", f"sft_stage.checkpoint={student}",
                                      "rl_algo.max_refills=0", f"run_tag={kind_tag}"]))
            elif kind in CONTROLS:
                out.append(self.consolidation_step(name, "opd", preset, experts, tag=kind_tag, soup=soup,
                                                   tables=tables, routing=kind))
            else:
                raise ValueError(f"pipeline.controls: unknown OPD control {kind!r}; use one of {', '.join(CONTROLS)}")
        return out

    def families(self, ctl: dict) -> list[Step]:
        """The study's positive control (pipeline.controls.families): per family group a fine-tune of
        the stage-0 SFT checkpoint on that group's designs only (stage 0's settings, then
        controls.family_sft), each made an expert by stage 0's DAPO procedure (its RL seed too); their
        soup, and OPD over them (the pipeline's OPD settings, then controls.opd) with its controls
        (controls.opd_controls). Step names start with control/. (The negative control, one stage's
        experts at other RL seeds, is the experts' own replicates: controls.rl_seeds.)"""
        groups = ctl["families"]
        if not groups:
            return []
        if "stage0" in self.ext:
            raise ValueError("pipeline.controls.families fine-tunes the base as stage 0 does; it cannot run with "
                             "checkpoints.stage0 (an external stage 0)")
        flat = [f for g in groups for f in g]
        if len(groups) < 2 or len(set(flat)) != len(flat) or not all(groups):
            raise ValueError(f"pipeline.controls.families={groups} must be >= 2 disjoint, non-empty family groups")
        out, experts, stage0 = [], {}, self.checkpoint_of("stage0")
        for i, group in enumerate(groups):
            own, wiring = self.owns["sft/stage0"]
            # forked from stage 0, so the family experts share a lineage and their soup is a competent
            # student (OPD's "new student"); every skill of its families: complementarity by construction
            sft = self.step(f"control/families/sft{i}", [*own, *ctl["family_sft"]], ["sft/stage0"],
                            [*wiring, f"sft_stage.init={stage0}", f"sft_stage.tasks.families=[{','.join(group)}]",
                             "sft_stage.skills=null", f"run_tag=fam{i}"])
            own, wiring = self.owns["rl/stage0"]
            wiring = [o for o in wiring if not o.startswith("sft_stage.checkpoint=")]
            experts[f"fam{i}"] = self.step(f"control/families/rl{i}", own, [sft.name],
                                           [*wiring, f"sft_stage.checkpoint={sft.run_dir / 'hf'}", f"run_tag=fam{i}"])
            out += [sft, experts[f"fam{i}"]]
        preset = [*self.p["opd"], *ctl["opd"]]
        pool = [o for o in preset if o.startswith("teacher_pool=")]  # OPD's pool size is the soup's too
        soup = self.consolidation_step("control/families/soup", "soup", [*self.p["merge"], *pool[-1:]], experts,
                                       tag="families")
        tables = self.teacher_tables(experts, "families/")
        opd = self.consolidation_step("control/families/opd", "opd", preset, experts, tag="families", soup=soup,
                                      tables=tables)
        return [*out, soup, *tables.values(), opd,
                *self.opd_controls(ctl["opd_controls"], "control/families/opd", preset, experts, "families", soup,
                                   tables)]

    def agentic(self, experts: dict, rounds: int) -> list[Step]:
        """The secondary protocol: each stage's first expert evaluated with `rounds` feedback turns. The
        study reads it as Pass@1 only, so a sample stops once it passes (protocol.stop_at=pass): the
        same Pass@1 rule without the rounds that could only add coverage."""
        if rounds < 0:
            raise ValueError(f"pipeline.controls.agentic_rounds={rounds}: set 0 (none) or the feedback turns to give")
        return [held_out_evaluation(expert, self.compose_step, self.c["runs_dir"], f"evaluate/agentic/{stage}",
                                    ["policy=model", "model=hf", f"model.path={expert.run_dir / 'hf'}",
                                     "protocol=agentic", f"protocol.rounds={rounds}", "protocol.stop_at=pass"],
                                    sampled=True)
                for stage, expert in (experts.items() if rounds else ())]
