"""The closed sets of strings that configure chorus, as enums the schema types its fields with, so
that Hydra refuses `consolidation.mode=pgg` while composing instead of after a model has loaded.

Each member's name is its value and the YAML spelling, which keeps three things true: Hydra converts
YAML strings by member name; a member equals, hashes and formats like its string, so library code may
compare `mode == "direct"`, look it up in a dict keyed by strings or put it in an f-string; and
`OmegaConf.to_container(..., enum_to_str=True)` (which writes names) yields the same plain strings.
No imports beyond the standard library: the schema and the simulator both import this module.
"""
from __future__ import annotations

import enum


class Choice(str, enum.Enum):
    """A str enum whose members are named like their values; str() and format() give the value
    (Python 3.11 would print `Class.member` for a str mix-in, e.g. inside an f-string or a path)."""

    @staticmethod
    def _generate_next_value_(name, start, count, last_values):  # auto() -> the member's own name
        return name

    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__


class Engine(Choice):
    """rl.engine, policy.engine: how samples are generated."""
    hf = enum.auto()  # transformers' generate inside the training process
    vllm = enum.auto()  # a vLLM engine (required under trainer=fsdp)
    openai = enum.auto()  # an OpenAI-compatible server (policy.api_*): chorus.evaluate and SFT teachers


class GenerationMode(Choice):
    """rl.generation, policy.generation: how the hf engine decodes (policy/hf_generation.py)."""
    auto = enum.auto()  # static on CUDA, shared elsewhere
    plain = enum.auto()  # dynamic KV cache, eager forward (transformers' default)
    static = enum.auto()  # static KV cache; on CUDA transformers compiles the decode step (CUDA graphs)
    shared = enum.auto()  # each prompt prefilled once for its n samples; KV kept in growing buffers


class InferenceCopyMode(Choice):
    """rl.inference_copy: whether the hf engine samples from a model.dtype copy of the policy."""
    auto = enum.auto()  # on where the trainer trains on a GPU in 16-bit mixed precision (model.dtype 16-bit)
    on = enum.auto()
    off = enum.auto()  # sample from the fp32 masters under the trainer's autocast


class Routing(Choice):
    """consolidation.routing (opd): chorus.opd.routing.ROUTINGS."""
    gated = enum.auto()  # CHORUS: the best teacher, only where it beats the student
    random = enum.auto()  # control: where gated routes, a random teacher
    no_gate = enum.auto()  # control: always the best teacher


class Unrouted(Choice):
    """consolidation.unrouted (opd): what a task no teacher beats the student on trains."""
    skip = enum.auto()  # CHORUS: nothing (the task is skipped)
    rl = enum.auto()  # the student's own samples under DAPO's group advantage, as the own-teacher control


class Routed(Choice):
    """consolidation.routed (opd): what a routed task's own samples train under."""
    distil = enum.auto()  # CHORUS: the teacher's per-token signal -(log pi_s - log pi_t)
    both = enum.auto()  # the group advantage (as unrouted=rl) plus the teacher's per-token signal


class TeacherSource(Choice):
    """teacher_pool.teachers[].source: where a teacher's per-task rewards come from."""
    online = enum.auto()  # K teacher samples per task, estimated once and cached in the run dir
    table = enum.auto()  # an evaluation run's per-task table (teachers[].rewards)


class MissingRewards(Choice):
    """teacher_pool.missing: a reward table that lacks some training tasks."""
    error = enum.auto()
    online = enum.auto()  # estimate those tasks online
    skip = enum.auto()  # leave that teacher out of those tasks


class Difficulty(Choice):
    """tasks.difficulty, sft_stage.tasks.difficulty (generated tasks)."""
    easy = enum.auto()
    medium = enum.auto()
    hard = enum.auto()
    mixed = enum.auto()  # the staged world: design k at easy/medium/hard in turn, strategies per design


class Split(Choice):
    """tasks.split: generated designs are train, validation (for tuning) or test (held out)."""
    train = enum.auto()
    validation = enum.auto()
    test = enum.auto()
    all = enum.auto()


class Quality(Choice):
    """policy.quality: which of a generated task's reference programs policy=reference scores."""
    strong = enum.auto()
    medium = enum.auto()
    weak = enum.auto()
    compact = enum.auto()


class SFTKind(Choice):
    """sft_stage.kinds: the kinds of SFT examples a stage trains on."""
    validated = enum.auto()  # execution-validated answers
    repair = enum.auto()  # agentic repair pairs (a failed answer, its feedback, a better answer)


class CandidateSource(Choice):
    """sft_stage.candidates: where a stage's candidate answers come from (each scored, kept when it passes)."""
    reference = enum.auto()  # the task's reference programs (generated grades, strategies) or reference testbench
    random = enum.auto()  # the uniform random programs a measured target was set with (tasks.measured_targets)
    teacher = enum.auto()  # samples of a teacher model (sft_stage.teacher), with its repairs of failed ones


class RepairSource(Choice):
    """sft_stage.repair_from: whose failed answers start a stage's repair pairs."""
    reference = enum.auto()  # the task's weaker reference programs (grades, strategies)
    own = enum.auto()  # the stage's starting model's own samples, scored by the simulator


class LogMode(Choice):
    """logger.mode (W&B)."""
    offline = enum.auto()
    online = enum.auto()  # needs an API key
    disabled = enum.auto()


class SimExecutor(Choice):
    """simulator.executor: where simulations run (chorus/sim/executor.py)."""
    local = enum.auto()  # a forkserver process pool on this machine
    ray = enum.auto()  # Ray tasks on a cluster (the `ray` extra)


class Isolation(Choice):
    """simulator.isolation: OS isolation of untrusted builds and runs (chorus/sim/isolation.py)."""
    required = enum.auto()  # refuse to run when the kernel lacks a layer
    best_effort = enum.auto()  # use what the kernel grants and warn once
    off = enum.auto()


class Launcher(Choice):
    """pipeline.launcher: how chorus.pipeline starts its steps (workflow/launchers.py)."""
    local = enum.auto()  # subprocesses of the pipeline's own process
    submitit = enum.auto()  # submitit jobs: SLURM where sbatch is found, else local processes (pipeline.submitit)


# `pass` is a Python keyword, so this one enum is built by the functional API; its members behave as
# every Choice's do.
AgenticStop = Choice("AgenticStop", ["full", "pass"])
AgenticStop.__doc__ = "protocol.stop_at (agentic): a sample stops at 100 % coverage (full) or once it passes (pass)."
