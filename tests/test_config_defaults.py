"""conf/ states only what differs from the schema: every default lives once, in the dataclasses of
chorus/config/schema.py (and SimConfig in chorus/sim/config.py), and every group option composes.

A YAML value equal to the schema's default is a second copy that silently stops being the default
when the schema changes, so it fails here. Exceptions, each for a reason:
- `name:` of a group option is the group selection itself (what `sft_stage=stage1` picked), stated
  in every option even where it equals the schema's `name` default.
- experiment presets (`# @package _global_`, conf/experiment/) are sweep points: `dare_d0.5` states
  `density: 0.5` so that the preset keeps meaning 0.5 if dare's default ever moves.
- list and dict values that the schema types as List/Dict (teacher_pool.teachers, a pipeline
  preset's override lists) are data: compared whole, never entry by entry.
- an interpolation (`${oc.env:WANDB_MODE,offline}`) is compared as written, so it counts as a
  difference unless the schema's default is the same interpolation.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError

from chorus.config.schema import CONF_DIR, register_configs

register_configs()
HYDRA_OWN = CONF_DIR / "hydra"  # Hydra's own settings (logging): not chorus's schema
GROUPS = sorted(p.name for p in CONF_DIR.iterdir() if p.is_dir() and p != HYDRA_OWN)
TOP = ("train", "evaluate", "analyze", "pipeline")
SKIP = ("defaults", "hydra")  # the defaults list and Hydra's own settings are not schema values


def schema_of(group: str | None, name: str) -> type:
    """The dataclass ConfigStore holds as `<group>/<name>` (or `<name>` at the root)."""
    return OmegaConf.get_type(ConfigStore.instance().load(f"{group}/{name}.yaml" if group else f"{name}.yaml").node)


def group_schema(group: str) -> type:
    """The one schema stored for a group (chorus.config.schema.register_configs)."""
    names = ConfigStore.instance().list(group)
    [name] = [n for n in names if n == f"{group}_schema.yaml"] or names
    return schema_of(group, name.removesuffix(".yaml"))


def slot_schema(group: str, value: dict) -> type:
    """What a preset's `<group>:` block is checked against: the group's one schema, or for consolidation
    (a schema per method) the method's whose settings hold every key the block sets."""
    if group != "consolidation":
        return group_schema(group)
    from chorus.config.schema import MERGE_SCHEMAS, OPDConf

    fits = [c for c in [*MERGE_SCHEMAS.values(), OPDConf] if set(value) <= {f.name for f in dataclasses.fields(c)}]
    return fits[0] if fits else group_schema("consolidation")


def file_defaults(path: Path, doc: dict) -> object:
    """Defaults the file's values are checked against: its `<x>_schema` entry of the defaults list,
    or the train config's root for a `_global_` experiment preset."""
    if path.read_text().startswith("# @package _global_"):
        return schema_of(None, "train_schema")()  # the presets' package
    entries = [d for d in doc.get("defaults", []) if isinstance(d, str)]
    parents = [d for d in entries if (path.parent / f"{d}.yaml").exists()]
    if parents and not any(d.endswith("_schema") for d in entries):  # it extends a sibling (study)
        sibling = path.parent / f"{parents[0]}.yaml"
        return file_defaults(sibling, yaml.safe_load(sibling.read_text()))
    [schema] = [d for d in entries if d.endswith("_schema")]
    group = path.parent.relative_to(CONF_DIR).parts[0] if path.parent != CONF_DIR else None
    return schema_of(group, schema)()


def same(a, b) -> bool:
    """YAML value == schema default, without bool/number confusion (True == 1 in Python)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def problems(node: dict, default, where: str, sweep_point: bool) -> list[str]:
    """Keys the schema lacks and (unless `sweep_point`) values equal to its defaults, under `node`."""
    found = []
    for key, value in node.items():
        path = f"{where}{key}"
        if dataclasses.is_dataclass(default) and key not in {f.name for f in dataclasses.fields(default)}:
            found.append(f"{path}: not in the schema")
            continue
        child = getattr(default, key)
        if child is None and key in GROUPS and isinstance(value, dict):  # a group slot (`consolidation: Any`)
            child = slot_schema(key, value)()
        if isinstance(value, dict) and dataclasses.is_dataclass(child):
            found += problems(value, child, path + ".", sweep_point)
        elif not sweep_point and same(value, child):
            found.append(f"{path}: {value!r} restates the schema default")
    return found


def yaml_problems(path: Path) -> list[str]:
    doc = yaml.safe_load(path.read_text()) or {}
    body = {k: v for k, v in doc.items() if k not in SKIP}
    in_group = path.parent != CONF_DIR
    if in_group and "name" in body:  # the group selection (see the module docstring)
        body.pop("name")
    sweep_point = path.read_text().startswith("# @package _global_")
    rel = path.relative_to(CONF_DIR)
    return [f"conf/{rel}: {p}" for p in problems(body, file_defaults(path, doc), "", sweep_point)]


ALL_YAML = sorted(p for p in CONF_DIR.rglob("*.yaml") if HYDRA_OWN not in p.parents)


@pytest.mark.parametrize("path", ALL_YAML, ids=lambda p: str(p.relative_to(CONF_DIR)))
def test_yaml_states_only_what_differs_from_the_schema(path):
    found = yaml_problems(path)
    assert not found, "\n".join(found)


def test_the_check_catches_restated_defaults_and_unknown_keys():
    """The check itself, on values as YAML spells them (a restated default nested in sft_stage.tasks,
    an int for a float default, a typo) and on a sweep point, which may restate but not misspell."""
    stage = group_schema("sft_stage")()
    node = {"tasks": {"per_family": stage.tasks.per_family, "seed": 7}, "lr": stage.lr, "stpes": 3,
            "min_coverage": int(stage.min_coverage)}
    assert problems(node, stage, "", sweep_point=False) == [
        f"tasks.per_family: {stage.tasks.per_family!r} restates the schema default",
        f"lr: {stage.lr!r} restates the schema default", "stpes: not in the schema",
        f"min_coverage: {int(stage.min_coverage)!r} restates the schema default"]
    assert problems(node, stage, "", sweep_point=True) == ["stpes: not in the schema"]


def options(group: str) -> list[str]:
    root = CONF_DIR / group
    return sorted(str(p.relative_to(root).with_suffix("")) for p in root.rglob("*.yaml"))


def group_choices() -> list[tuple[str, str]]:
    """(top-level config, `group=option`) for every option of every group its defaults list names."""
    runs = []
    for top in TOP:
        defaults = yaml.safe_load((CONF_DIR / f"{top}.yaml").read_text())["defaults"]
        for group in [next(iter(d)) for d in defaults if isinstance(d, dict) and next(iter(d)) in GROUPS]:
            runs += [(top, f"{group}={o}") for o in options(group)]
    return runs


@pytest.fixture(scope="module")
def hydra_conf():
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        yield


# an example preset of model=hf
NAMED_OTHERWISE = {"model=qwen3_4b": "hf"}


@pytest.mark.parametrize("top,choice", group_choices(), ids=lambda x: x)
def test_every_group_option_composes(hydra_conf, top, choice):
    """Composing validates every value against the schema's types; the option's `name` is its file's."""
    cfg = OmegaConf.to_container(compose(config_name=top, overrides=[choice]), resolve=True, enum_to_str=True)
    group, option = choice.split("=")
    if isinstance(cfg.get(group), dict) and "name" in cfg[group]:  # experiment/ and simulator/ have none
        assert cfg[group]["name"] == NAMED_OTHERWISE.get(choice, option)


def test_every_group_directory_is_composed():
    """A group folder no top-level config names would escape the test above."""
    composed = {c.split("=")[0] for _, c in group_choices()}
    assert composed == set(GROUPS)


@pytest.mark.parametrize("name", options("rl_algo"))
def test_get_algo_is_what_the_rl_algo_option_composes_to(hydra_conf, name):
    """The library reads an algorithm's settings from the same place as Hydra (schema + YAML): the
    algorithm a test builds with get_algo(name) is the one `rl_algo=<name>` trains with."""
    from chorus.rl.algos import ESTIMATORS, from_conf, get_algo

    composed = OmegaConf.to_object(compose(config_name="train", overrides=[f"rl_algo={name}"])).rl_algo
    assert get_algo(name) == from_conf(composed)  # chorus.train builds it from the composed group
    assert (get_algo(name).advantage, get_algo(name).aggregation) == ESTIMATORS[name]
    assert get_algo(name, kl_coef=0.05).kl_coef == 0.05
    with pytest.raises(ConfigKeyError, match="eps_hihg"):  # a misspelt setting fails as on the command line
        get_algo(name, eps_hihg=0.3)


def test_every_algorithm_has_one_estimator_entry_and_one_yaml():
    from chorus.rl.algos import ESTIMATORS

    assert sorted(ESTIMATORS) == options("rl_algo")


def test_the_study_runs_opds_fourth_design_as_its_preset_states_it(hydra_conf):
    """conf/pipeline/study.yaml writes design 4's settings out (so they follow staged's opd list);
    conf/experiment/opd/design4.yaml is the design as users run it: the two must compose alike."""
    study = yaml.safe_load((CONF_DIR / "pipeline" / "study.yaml").read_text())
    written = compose(config_name="train", overrides=["consolidation=opd", *study["controls"]["opd"]])
    preset = compose(config_name="train", overrides=["experiment=opd/design4"])
    assert OmegaConf.to_container(written.consolidation) == OmegaConf.to_container(preset.consolidation)
    assert OmegaConf.to_container(preset.consolidation)["gate_reference"] == "stage0"
