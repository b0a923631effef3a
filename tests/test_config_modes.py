"""Closed sets of strings are enums (chorus/core/modes.py): a bad value fails while Hydra composes,
naming its key, and a good one reads, prints and serialises like the plain string it was."""
import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ValidationError

from chorus.core import modes
from chorus.config.schema import CONF_DIR, register_configs

register_configs()
CHOICES = [c for c in vars(modes).values()
           if isinstance(c, type) and issubclass(c, modes.Choice) and c is not modes.Choice]


@pytest.mark.parametrize("choice", CHOICES, ids=lambda c: c.__name__)
def test_members_are_their_strings(choice):
    for m in choice:
        assert m.name == m.value == m  # Hydra converts by name; the library compares with strings
        assert str(m) == f"{m}" == "%s" % m == m.value  # Python 3.11 would print Class.member
        assert json.dumps({m: m}) == json.dumps({m.value: m.value}) and {m.value: 1}[m] == 1
        assert str(Path("runs") / m) == f"runs/{m.value}"


@pytest.mark.parametrize("config,override,key", [
    ("train", ["consolidation=opd", "consolidation.routing=gatd"], "consolidation.routing"),
    ("train", ["consolidation=opd", "consolidation.routed=rl"], "consolidation.routed"),
    ("train", ["rl.engine=vlm"], "rl.engine"),
    ("train", ["rl.tasks.difficulty=extreme"], "rl.tasks.difficulty"),
    ("train", ["rl.eval_tasks.split=val"], "rl.eval_tasks.split"),
    ("train", ["sft_stage.tasks.difficulty=medum"], "sft_stage.tasks.difficulty"),
    ("train", ["sft_stage.kinds=[validated,fix]"], "sft_stage.kinds"),
    ("train", ["teacher_pool.missing=ignore"], "teacher_pool.missing"),
    ("train", ["teacher_pool.teachers.0.source=web"], "teacher_pool.teachers"),
    ("train", ["logger.mode=sync"], "logger.mode"),
    ("train", ["simulator.isolation=none"], "simulator.isolation"),
    ("evaluate", ["policy=model", "policy.engine=vlm"], "policy.engine"),
    ("evaluate", ["policy.quality=best"], "policy.quality"),
    ("evaluate", ["tasks.split=dev"], "tasks.split"),
    ("evaluate", ["protocol=agentic", "protocol.stop_at=passed"], "protocol.stop_at"),
])
def test_a_bad_mode_fails_at_composition_naming_its_key(config, override, key):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        with pytest.raises(ConfigCompositionException) as err:  # the CLI prints its cause:
            compose(config_name=config, overrides=override)
    assert isinstance(err.value.__cause__, ValidationError) and f"full_key: {key}" in str(err.value.__cause__)


def test_the_library_accepts_exactly_the_enum_values():
    """Where library code keeps its own list of valid strings, it is the enum's."""
    from chorus.policy.static import QUALITIES
    from chorus.protocol.agentic import STOPS
    from chorus.sim.isolation import MODES

    assert set(MODES) == {m.value for m in modes.Isolation}
    assert set(QUALITIES) == {m.value for m in modes.Quality}
    assert STOPS == ("full", "pass") and set(STOPS) == {m.value for m in modes.AgenticStop}
