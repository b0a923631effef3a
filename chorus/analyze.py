"""python -m chorus.analyze runs='<glob>' [experts='[dapo/stage0,dapo/stage1]'] [out=DIR] [wandb=entity/project
    wandb_filter.group=<runs dir> wandb_filter.tags='["model=tiny-xs"]' wandb_filter.job_type=rl wandb_filter.mixed=false]
python -m chorus.analyze power=true [design.tasks=150 design.samples=16 design.levels='[0.2,0.36,0.26]'] [runs=...]
python -m chorus.analyze curve=<RL run dir trained with rl.eval_every=N> [out=DIR]
python -m chorus.analyze power=true design.statistic=pattern design.tasks=100 design.samples=8 [design.levels='[0.3]']
python -m chorus.analyze study='[runs/pipeline/study/seed0,runs/pipeline/study/seed1,...]' [study_keep=DIR] [out=DIR]

Loads the per-task tables of every run the glob finds (or a W&B project's runs), prints the
CHORUS-style table as markdown and writes table.md, table.csv and the PNG plots into `out`.
power=true prints the minimum detectable oracle headroom of a design instead (settings not given
are read from the runs' experts). study=[...] prints the study's table and pre-registered verdict
(docs/results.md, "Study v2, pre-registered") over its seeds' runs_dirs, each made by pipeline=study
(v1's kept seeds are re-analysed the same way), and writes out/study.json; study_keep=DIR first copies
what the verdict reads (a few hundred KB a seed) to DIR/<seed dir's name> and reads it from there.
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from .config.schema import CONF_DIR, register_configs

register_configs()


@hydra.main(config_path=str(CONF_DIR), config_name="analyze", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from .analysis.report import analyze_runs
    from .analysis.validity import VALIDITY_NOTE
    from .tracking.runs import load_runs, load_wandb_runs, wandb_filters, with_pass_rule

    c = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    if c["power"]:
        return power(c)
    if c["study"]:
        return study(c)
    if c["curve"]:
        return learning_curve(c)
    out = Path(c["out"] or HydraConfig.get().runtime.output_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=FutureWarning)
        warnings.simplefilter("always", category=UserWarning)
        warnings.showwarning = lambda msg, *a, **k: print(f"chorus.analyze: warning: {msg}", file=sys.stderr)
        try:
            if c["wandb"]:
                f = c["wandb_filter"]
                runs = load_wandb_runs(c["wandb"], wandb_filters(f["group"], f["tags"], f["job_type"], f["config"]),
                                       mixed=f["mixed"])
            else:
                runs = load_runs(c["runs"])
            runs = with_pass_rule(runs, c["pass_coverage"])  # the runs' own rule unless one is given
            for path, why in runs.skipped:
                print(f"chorus.analyze: skipped {path}: {why}", file=sys.stderr)
            result = analyze_runs(runs, out, c["experts"], k=c["k"], min_rate=c["min_rate"], n_boot=c["bootstrap"],
                                  alpha=c["alpha"], seed=c["seed"])
        except (ValueError, OSError) as exc:  # NoRunsError is a ValueError
            print(f"chorus.analyze: error: {str(exc).splitlines()[0]}", file=sys.stderr)
            sys.exit(2)
    print(result["markdown"])
    print("\nCross-fitted oracle union: headroom over the best expert, beside the null of identical experts\n")
    print(result["headroom"])
    print(f"\n{VALIDITY_NOTE}")
    if result["sft_deltas"]:
        print(f"\nEach expert against its own SFT start (paired bootstrap over tasks):\n\n{result['sft_deltas']}")
    if result["random_deltas"]:
        print(f"\nEach run against uniform random stimulus (paired bootstrap over tasks):\n\n{result['random_deltas']}")
    print(f"\n{len(runs.runs)} runs, {int(result['table']['n_tasks'].iloc[0])} common tasks -> {out}")


def study(c: dict) -> None:
    """study=[dir,...]: the study's table and pre-registered verdict over its seeds' dirs, from the
    kept evidence alone; DIR/study.json beside it (out=DIR, default the Hydra run dir)."""
    from .analysis.study_manifest import keep_evidence
    from .analysis.study_verdict import analyse, markdown, write

    try:
        seed_dirs, amended = list(c["study"]), tuple(c["study_amended"])
        if c["study_keep"]:
            kept = [Path(c["study_keep"]) / Path(d).name for d in seed_dirs]
            if len(set(kept)) < len(kept):
                raise ValueError(f"study_keep: the seed dirs {seed_dirs} share a name; give dirs with distinct names")
            for d, dest in zip(seed_dirs, kept):
                print(f"kept {len(keep_evidence(d, dest, amended))} files of {d} in {dest}")
            seed_dirs = [str(k) for k in kept]
        result = analyse(seed_dirs, alpha=c["alpha"], seed=c["seed"], n_boot=c["bootstrap"],
                         pass_coverage=c["pass_coverage"], amended=amended)
        path = write(result, c["out"] or HydraConfig.get().runtime.output_dir)
    except (ValueError, OSError) as exc:
        print(f"chorus.analyze: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        sys.exit(2)
    print(markdown(result))
    print(f"\n-> {path}")


def learning_curve(c: dict) -> None:
    """curve=RUN_DIR: an RL run's held-out learning curve and the RL length chosen from it."""
    import json

    from .analysis import learning_curve as lc

    try:
        result = lc.curve(c["curve"], n_boot=c["bootstrap"], seed=c["seed"])
        out = Path(c["out"] or HydraConfig.get().runtime.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "curve.json").write_text(json.dumps(result, indent=1))
        lc.plot(result, out / "curve.png")
    except (ValueError, OSError) as exc:
        print(f"chorus.analyze: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        sys.exit(2)
    print(lc.markdown(result))
    print(f"\n-> {out / 'curve.json'}, {out / 'curve.png'}")


def power(c: dict) -> None:
    """power=true: the minimum detectable headroom of a design, given or read from runs."""
    from .analysis.power import POWER_SIMS, minimum_detectable_headroom, power_report, resolve_design
    from .analysis.table import choose_experts
    from .tracking.runs import load_runs, with_pass_rule

    d = c["design"]
    if d["statistic"] == "pattern":
        return pattern_power(d)
    if d["statistic"] != "headroom":
        print(f"chorus.analyze: error: design.statistic={d['statistic']} is not one of headroom, pattern", file=sys.stderr)
        sys.exit(2)
    try:
        table = experts = None
        if any(d[k] is None for k in ("tasks", "samples", "levels", "hi", "lo")) and c["runs"]:
            try:
                runs = with_pass_rule(load_runs(c["runs"]), c["pass_coverage"])
                table, experts = runs.table, choose_experts(runs.runs, c["experts"])
            except ValueError:
                if any(d[k] is None for k in ("tasks", "samples", "levels")):
                    raise
        design = resolve_design(d, table, experts)
        result = minimum_detectable_headroom(design, power=d["power"], n_sims=d["sims"] or POWER_SIMS, seed=d["seed"])
    except (ValueError, OSError) as exc:
        print(f"chorus.analyze: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        sys.exit(2)
    print(power_report(result))


def pattern_power(d: dict) -> None:
    """power=true design.statistic=pattern: the primary test's minimum detectable stage share."""
    from .analysis.pattern_power import PatternDesign, minimum_detectable_share, report

    try:
        if d["tasks"] is None or d["samples"] is None:
            raise ValueError("design.statistic=pattern needs design.tasks and design.samples")
        level = {"level": sum(d["levels"]) / len(d["levels"])} if d["levels"] else {}
        design = PatternDesign(int(d["tasks"]), int(d["samples"]), **level,
                               **{k: v for k, v in d["pattern"].items() if v is not None})
        design.check()
        result = minimum_detectable_share(design, power=d["power"], sims=d["sims"] or 200, seed=d["seed"])
    except ValueError as exc:
        print(f"chorus.analyze: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        sys.exit(2)
    print(report(result))


if __name__ == "__main__":
    main()
