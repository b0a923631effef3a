"""python -m chorus.ingest src=<folder> out=<tasks.jsonl> [random_runs=4] [target=85] [simulator.workers=2]

Your own designs as tasks: one design per subfolder of `src` (or one per top module found among RTL
files at its root), each with an optional chorus.yaml (top, files, include_dirs, defines, parameters,
instance, spec, target). Each design is elaborated with pyslang, its ports and parameters read, its
spec taken from a README/spec file beside the RTL (else its port table), its target measured (the best
of `random_runs` uniform random programs, then `target_fraction` of the way to 100 %, or a flat
`target`) and its split drawn from a hash of its name. A design that cannot be a task is refused in
one line and the others still ingest. The rows load with `tasks=jsonl tasks.path=<out>`.
"""
from __future__ import annotations

import hydra
from omegaconf import DictConfig, OmegaConf

from .config.schema import CONF_DIR, IngestOptions, register_configs
from .entry import entry_point

register_configs()


def run(c: dict):
    """Ingest c["src"] into c["out"] (the composed config as plain data); returns the IngestResult."""
    import dataclasses

    from .core.task import write_jsonl
    from .sim.config import sim_config
    from .tasks.ingest import ingest

    if not c.get("src") or not c.get("out"):
        raise ValueError("chorus.ingest needs src=<folder of designs> and out=<tasks.jsonl>")
    sim, workers = sim_config(c["simulator"])
    options = {f.name: c[f.name] for f in dataclasses.fields(IngestOptions)}
    result = ingest(c["src"], sim, workers=workers, **options)
    for name, reason in result.refused:
        print(f"chorus.ingest: {name}: refused: {reason}")
    if not result.tasks:
        raise ValueError(f"no design under {c['src']} could be ingested ({len(result.refused)} refused, above)")
    write_jsonl(result.tasks, c["out"])
    return result


@hydra.main(config_path=str(CONF_DIR), config_name="ingest", version_base="1.3")
def main(cfg: DictConfig) -> None:
    c = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    with entry_point("chorus.ingest"):
        result = run(c)
    splits = ", ".join(f"{k} {v}" for k, v in result.splits.items())
    print(f"{len(result.tasks)} tasks ({splits}) -> {c['out']}; {len(result.refused)} refused; random coverage "
          f"simulated for {result.measured} designs, read from the cache for {result.cached}; {result.seconds:.1f} s")


if __name__ == "__main__":
    main()
