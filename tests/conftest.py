from pathlib import Path

import pytest

from chorus.sim import SimConfig
from chorus.tasks.schema import Task
from helpers import AND2, COUNTER

REPO = Path(__file__).resolve().parent.parent
SHARED_CVDP = REPO.parent / "shared" / "cvdp"


@pytest.fixture(scope="session")
def cache_root(tmp_path_factory) -> Path:
    # Fresh per test session: the runtime kit is built once, and no result leaks between runs.
    return tmp_path_factory.mktemp("chorus-cache")


@pytest.fixture
def sim_cfg(cache_root) -> SimConfig:
    return SimConfig(cache=False, cache_dir=str(cache_root), run_timeout_s=20)


@pytest.fixture(scope="session")
def cvdp_dir() -> Path:
    if not (SHARED_CVDP / "cvdp_v1.0.2_cid012.jsonl").exists():
        pytest.skip("../shared/cvdp is not present (only on the project's own machines)")
    return SHARED_CVDP


@pytest.fixture
def and2_task() -> Task:
    return Task(id="and2", spec="AND gate", rtl={"and2.sv": AND2}, top="and2", instance="uut",
                targets={"overall": 90.0})


@pytest.fixture
def counter_task() -> Task:
    return Task(id="cnt", spec="counter", rtl={"cnt.sv": COUNTER}, top="cnt", instance="uut",
                targets={"overall": 90.0})


@pytest.fixture(scope="session")
def tiny_xs(cache_root) -> Path:
    """A real (random-init) xs model + tokenizer in Hugging Face format, built once per session."""
    from chorus.policy.tiny import build_tiny

    return build_tiny("xs", seed=0, cache_root=cache_root)
