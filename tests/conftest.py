import importlib.util
import os
import tempfile
from pathlib import Path

import pytest

from chorus.sim import SimConfig, workdirs
from chorus.core.task import Task
from helpers import AND2, COUNTER, PROMPT

REPO = Path(__file__).resolve().parent.parent
SHARED_CVDP = REPO.parent / "shared" / "cvdp"
PROBE_DIR = Path(__file__).resolve().parent / "numerics_probe"
# The files whose tests run what a GPU run does differently (fused AdamW and clipping under bf16-mixed,
# the inference copy, activation checkpointing, packing, lean log-probs, static-cache and shared-prefix
# generation, stop ids, FSDP2, the vLLM engine's stand-in, the memory plan, the one-shot check) on the
# CPU: marked gpu_path, so that `pytest -m gpu_path` runs them under other torch/transformers versions
GPU_PATH = {"test_gpu_path.py", "test_precision.py", "test_devices.py", "test_inference_copy.py",
            "test_lean_logprobs.py", "test_packing.py", "test_hf_generation.py", "test_fsdp.py",
            "test_trainer_setup.py", "test_vllm_engine.py", "test_vllm_lifecycle.py", "test_memory_plan.py",
            "test_gpu_oneshot.py"}


def pytest_addoption(parser):
    parser.addoption("--numerics-probe", choices=["threads2", "seed"], default=None,
                     help="run on another floating-point path (tests/numerics_probe/sitecustomize.py): "
                          "a test that fails only then rests on one CPU's numerics")


def pytest_configure(config):
    default_signal_dispositions()
    probe = config.getoption("--numerics-probe")
    if probe:  # here and, through PYTHONPATH's sitecustomize, in every subprocess the tests start
        os.environ["CHORUS_NUMERICS_PROBE"] = probe
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROBE_DIR), os.environ.get("PYTHONPATH")]))
        spec = importlib.util.spec_from_file_location("chorus_numerics_probe", PROBE_DIR / "sitecustomize.py")
        probe_module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(probe_module)
        probe_module.apply(probe)


def default_signal_dispositions() -> None:
    """SIGINT, SIGQUIT and SIGTERM as an interactive session has them. A suite started in the background
    by a non-interactive shell (`nohup python -m pytest &`, a script, CI) runs with SIGINT and SIGQUIT
    ignored, and every process it starts inherits that: a test's own subprocess and the ones chorus
    starts under test (pipeline steps, submitit's jobs) alike, so a test that stops one with SIGINT
    would wait out its work instead. Set here, in the pytest process before any test runs, it reaches
    all of them (a disposition a test sets itself, to stand for a background runner, is its own)."""
    import signal

    for sig, handler in ((signal.SIGINT, signal.default_int_handler), (signal.SIGQUIT, signal.SIG_DFL),
                         (signal.SIGTERM, signal.SIG_DFL)):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, handler)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in GPU_PATH:
            item.add_marker(pytest.mark.gpu_path)


@pytest.fixture
def work(tmp_path, monkeypatch):
    """Every chorus work dir of this test is created here, so leftovers can be seen."""
    d = tmp_path / "work"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    workdirs.end_run()  # this test's run dir: in `work`
    yield d
    workdirs.end_run()


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
    # CVDP's layout, as the bundled tasks have it: the DUT under rtl/ (the testbench goes under verif/)
    return Task(id="cnt", spec="counter", rtl={"rtl/cnt.sv": COUNTER}, top="cnt", instance="uut",
                targets={"overall": 90.0})


@pytest.fixture(scope="session")
def tiny_xs(cache_root) -> Path:
    """A real (random-init) xs model + tokenizer in Hugging Face format, built once per session."""
    from chorus.policy.tiny import build_tiny

    return build_tiny("xs", seed=0, cache_root=cache_root)


# --- a tiny policy that has learned the answer shape, shared by the RL and OPD tests ---

@pytest.fixture(scope="session")
def sim(cache_root) -> SimConfig:
    return SimConfig(cache=False, cache_dir=str(cache_root), run_timeout_s=20)


@pytest.fixture(scope="session")
def rl_tasks():
    from chorus.tasks import load_tasks

    return load_tasks("generated", split="train", difficulty="easy", per_family=2, seed=0)


@pytest.fixture(scope="session")
def eval_tasks():
    from chorus.tasks import load_tasks

    return load_tasks("generated", split="test", difficulty="easy", per_family=4, seed=0)[:3]


@pytest.fixture(scope="session")
def sft_xs(tiny_xs, rl_tasks, sim, tmp_path_factory) -> str:
    """The xs model after a short SFT: its samples at T=1 differ (in coverage, validity and length),
    so groups have reward variance to learn from."""
    from transformers import AutoTokenizer

    from chorus.policy.prompts import fit_messages
    from chorus.sft.data import build_examples
    from chorus.sft.run import train_sft

    tok = AutoTokenizer.from_pretrained(tiny_xs)
    examples = build_examples(rl_tasks, "vectors", sim, 50.0, repair=False, workers=2,
                              prompt=lambda t: fit_messages(t, "vectors", tok, PROMPT)[0])
    out = tmp_path_factory.mktemp("sft-xs")
    return train_sft(str(tiny_xs), examples, out, steps=40, batch_size=4, lr=3e-3, warmup_steps=5)["checkpoint"]


