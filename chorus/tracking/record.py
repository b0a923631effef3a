"""What a run dir records about the run itself: its metadata and the composed Hydra config."""
from __future__ import annotations

import functools
import json
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

ERROR_FILE = "error.txt"  # a job's handled one-line error, left in its Hydra dir for the pipeline runner
META_KEYS = ("job", "sft_stage", "rl_algo", "consolidation", "teacher_pool", "model", "seed", "git_revision",
             "machine", "pass_coverage", "policy", "student",  # student: the checkpoint an OPD run started from
             "stop_at")  # protocol=agentic's stopping rule: `pass` ties the run to its own pass rule


def git_revision(where: str | Path = Path(__file__).parent) -> str | None:
    """HEAD of the checkout chorus runs from, with '+dirty' when tracked files differ; None outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


@functools.lru_cache(maxsize=1)
def machine_kind() -> str:
    """The kind of machine a run ran on (architecture, CPU model, CPU count, GPU): the same string on
    every machine of one kind, so a study can refuse runs from two kinds (a second machine moved an
    expert as much as the RL seed did). Nothing that varies between runs (hostname, free memory)."""
    return f"{platform.machine()}, {cpu_model()}, {os.cpu_count()} CPUs, {gpu_name()}"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"  # no /proc (macOS) or no model name (some ARM kernels)


def gpu_name() -> str:
    """The first visible GPU's name, or 'no GPU'. NVIDIA's driver names it in /proc without a CUDA
    context; torch.cuda.get_device_name would create one in every job, a CPU-only evaluation's too,
    taking device memory from a GPU job running beside it. torch names other GPUs (ROCm)."""
    try:
        import torch
    except ImportError:
        return "no GPU"
    if not torch.cuda.is_available():  # counts devices; torch.cuda stays uninitialised
        return "no GPU"
    for info in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
        for line in info.read_text(errors="replace").splitlines():
            if line.startswith("Model:"):
                return line.split(":", 1)[1].strip()
    return torch.cuda.get_device_name(0)


def model_name(model: dict) -> str:
    """A short name for the configured base model: tiny-<size>, or the path / hub id it loads."""
    if model.get("path"):
        return str(model["path"])
    if model.get("name") == "tiny":
        return f"tiny-{model.get('size')}"
    return str(model.get("name"))


def checkpoint_model(checkpoint: str | Path | None) -> str | None:
    """The base model a checkpoint descends from: what the chorus run that made it recorded
    (summary.json or stage.json beside its hf/), tiny-<size> for a tiny model chorus built; None
    when neither says (a hub model or a checkpoint from elsewhere: the config's name stands)."""
    if not checkpoint:
        return None
    path = Path(checkpoint)
    for record in ("summary.json", "stage.json"):
        try:
            model = json.loads((path.parent / record).read_text()).get("model")
        except (OSError, ValueError, AttributeError):
            continue
        if model:
            return str(model)
    return tiny_model_name(path)


def tiny_model_name(path: str | Path) -> str | None:
    """tiny-<size> for a model dir policy/tiny.build_tiny named in the cache (tiny-<size>-seed<seed>-...),
    else None. Here rather than beside build_tiny: reading a record must not import the model code above
    tracking (docs/reference/layout.md)."""
    found = re.match(r"^(tiny-[a-z0-9]+)-seed\d+", Path(path).name)
    return found.group(1) if found else None


def run_metadata(job: str, model: str | None, seed: int | None, sft_stage: str | None = None,
                 rl_algo: str | None = None, consolidation: str | None = None,
                 teacher_pool: str | None = None, pass_coverage: float | None = None) -> dict:
    """The keys every summary.json carries, so that readers can group runs without parsing paths.
    `pass_coverage` is the run's pass rule: a sample passes at that coverage %, or (None) at its
    task's own target; readers apply the rule the run was made with. `machine`: machine_kind()."""
    return {"job": job, "sft_stage": sft_stage, "rl_algo": rl_algo, "consolidation": consolidation,
            "teacher_pool": teacher_pool, "model": model, "seed": seed, "git_revision": git_revision(),
            "machine": machine_kind(), "pass_coverage": pass_coverage}


def copy_hydra_config(hydra_output_dir: str | Path, run_dir: str | Path) -> None:
    """Put the invocation's .hydra/ (config, overrides) next to the results it produced."""
    src = Path(hydra_output_dir) / ".hydra"
    dst = Path(run_dir) / ".hydra"
    if src.is_dir() and src.resolve() != dst.resolve():
        shutil.copytree(src, dst, dirs_exist_ok=True)


def write_error(hydra_output_dir: str | Path, exc: BaseException) -> None:
    """Leave a job's one-line error where a pipeline runner looks for it (workflow/runner.py)."""
    try:
        Path(hydra_output_dir).mkdir(parents=True, exist_ok=True)
        (Path(hydra_output_dir) / ERROR_FILE).write_text(str(exc).splitlines()[0] + "\n")
    except OSError:
        pass
