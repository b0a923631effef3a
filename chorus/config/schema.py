"""Hydra structured configs: the schema every YAML under conf/ is validated against, and the one
place every setting's default lives (the simulator's: SimConfig in sim/config.py). A YAML option
under conf/ states only what differs from these defaults (tests/test_config_defaults.py checks it);
closed sets of strings are the enums of chorus/core/modes.py, so a bad value fails at composition.
Library code builds Teacher and RewardConfig from here too. Imports stay light (no torch, pandas)."""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore

from . import cli_help  # noqa: F401  registers the chorus_help resolver behind each job's --help
from ..core.modes import AgenticStop, CandidateSource, Difficulty, Engine, GenerationMode, InferenceCopyMode, \
    Launcher, LogMode, MissingRewards, Quality, RepairSource, Routed, Routing, SFTKind, Split, \
    TeacherSource, Unrouted
from ..core.stats import N_BOOT
from ..sim.config import SimConfig

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


@dataclass
class TasksConf:
    name: str = "bundled"
    path: Optional[str] = None
    split: Split = Split.all
    limit: Optional[int] = None
    ids: Optional[List[str]] = None
    reference_dir: Optional[str] = None
    seed: int = 0  # tasks=generated: the generator's seed
    per_family: int = 8  # tasks=generated: designs per family
    difficulty: Difficulty = Difficulty.medium  # tasks=generated
    families: Optional[List[str]] = None  # tasks=generated: a subset of families
    # tasks=generated: drop the designs whose class family/difficulty/skills (skills: those of the
    # strategies reaching the target, `none` if none does) matches one of these globs, e.g. "*/*/none"
    prune: Optional[List[str]] = None
    trusted: bool = False  # the tasks' RTL may use host code ($c, DPI, `systemc_*): only for RTL you trust


@dataclass
class IngestOptions:
    """How chorus.ingest turns a folder of designs into tasks (chorus/tasks/ingest.py); the pipeline's
    `ingest` too."""
    random_runs: int = 4  # uniform random programs measured per design; the best is the rule's baseline
    random_cycles: int = 500  # cycles of each random program
    # the target's place between random stimulus's best (0) and 100 % coverage (1)
    target_fraction: float = 0.3333333333333333
    target: Optional[float] = None  # a flat target (percent) for every design instead; a manifest's own wins
    # shares of the designs per split, drawn from a hash of each design's name (never its position)
    splits: Dict[str, float] = field(default_factory=lambda: {"train": 0.6, "validation": 0.2, "test": 0.2})
    split_seed: int = 0  # another seed draws other splits (the same for the same names)
    instance: str = "dut"  # the instance name testbenches must use, unless a manifest names one


@dataclass
class IngestConf(IngestOptions):
    src: Optional[str] = None  # the folder: one design per subfolder, or one per top module at its root
    out: Optional[str] = None  # the task file written (JSONL; load it with tasks=jsonl tasks.path=...)
    simulator: Any = None


@dataclass
class SamplerConf:
    """A model sampled for stimulus through an engine: policy=model's settings, and an SFT stage's
    teacher (sft_stage.teacher)."""
    engine: Engine = Engine.hf
    generation: GenerationMode = GenerationMode.shared  # engine=hf: shared | plain | static | auto (as rl's)
    max_new_tokens: int = 512
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_prompt_tokens: int = 3072
    threads: int = 1  # engine=hf on CPU: torch threads (the other core simulates)
    # engine=openai: an OpenAI-compatible server's /v1 root (transformers serve, vLLM, an API)
    api_base_url: Optional[str] = None
    api_model: Optional[str] = None  # the served model's name (None: the model's path)
    api_key_env: Optional[str] = None  # the environment variable holding the key (None: no key sent)
    api_concurrency: int = 4  # requests in flight
    api_max_retries: int = 5  # on 429/5xx, timeouts and refused connections
    api_backoff_s: float = 1.0  # first wait between tries; doubles each retry (a Retry-After header wins)
    api_timeout_s: float = 120.0  # per request
    # fields merged into every request body, for server-specific sampling switches: `transformers serve`
    # decodes greedily unless the model's generation_config samples, so it needs
    # api_extra_body.generation_config='{"do_sample": true}'; vLLM and SGLang take e.g. min_p here
    api_extra_body: Dict[str, Any] = field(default_factory=dict)
    # keep finished samples in <cache root>/openai/completions.sqlite (the cache root is simulator.cache_dir,
    # else $CHORUS_CACHE_DIR, else ~/.cache/chorus), keyed by (endpoint, model, prompt, sampling, sample):
    # a rerun after a crash pays only for the samples it lacks
    api_cache: bool = True


@dataclass
class PolicyConf(SamplerConf):
    name: str = "reference"
    dir: Optional[str] = None  # policy=file
    quality: Quality = Quality.strong  # policy=reference on generated tasks
    cycles: int = 500  # policy=random
    seed: int = 0  # policy=random; policy=model: the sampling seed


@dataclass
class TeacherConf(SamplerConf):
    """sft_stage.teacher (sft_stage.candidates has teacher): the model whose samples are a stage's
    candidate answers. Its tokenizer renders its prompts (engine=openai too: the completions route
    takes text), so `path` must hold one."""
    path: Optional[str] = None  # a checkpoint dir or hub id; null: the stage's starting model
    samples: int = 4  # samples per task, each scored in the simulator
    # ask the teacher to repair each failed sample once, shown the simulator's feedback as protocol=agentic
    # gives it; a passing repair is the answer of that repair example
    repair: bool = True
    seed: int = 0


@dataclass
class ModelConf:
    name: str = "tiny"  # tiny (built locally) | hf (any Hugging Face id or local path)
    path: Optional[str] = None
    size: str = "s"  # tiny presets: xs (~0.5M params) | s (~3.4M, the design-card model) | m (~11M)
    seed: int = 0
    # tiny: LM steps on the staged world's training corpus before any SFT (chorus.policy.pretrain):
    # a base that the SFT stages fine-tune; 0 keeps the random init
    pretrain_steps: int = 0
    dtype: str = "float32"
    device: str = "cpu"
    # sdpa: 2.3x faster generation and 1.8x faster training than eager at 2.5k-token prompts on CPU
    attn_implementation: Optional[str] = "sdpa"


@dataclass
class ProtocolConf:
    name: str = "direct"  # direct | agentic
    rounds: int = 3  # agentic: refinements after the first answer
    markov: bool = False  # agentic: keep only system, user, best answer and its feedback
    stop_at: AgenticStop = AgenticStop.full  # agentic: stop at 100 % coverage (full) or once it passes (pass)
    overlap: bool = True  # simulate finished samples while others still generate
    batch_tasks: int = 4  # tasks per generation batch


@dataclass
class FormatConf:
    name: str = "testbench"
    reset_cycles: int = 2  # body, vectors, cocotb: cycles of reset chorus applies first
    max_time_ns: int = 1_000_000  # body, cocotb: simulated-time limit chorus imposes
    max_cycles: int = 20000  # vectors: longest accepted stimulus
    seed: int = 1  # vectors, cocotb: seed for random draws


def _simulator_schema():
    """SimConfig's fields (lists where it has tuples) plus the number of parallel workers."""
    hints = typing.get_type_hints(SimConfig)
    spec = []
    for f in dataclasses.fields(SimConfig):
        typ = hints[f.name]
        if type(None) in typing.get_args(typ):  # `str | None` -> Optional[str] for OmegaConf
            typ = Optional[next(a for a in typing.get_args(typ) if a is not type(None))]
        if f.name == "extra_verilator_flags":
            spec.append((f.name, List[str], field(default_factory=list)))
        else:
            spec.append((f.name, typ, field(default=f.default)))
    spec.append(("workers", Optional[int], field(default=None)))  # default: one per core
    return dataclasses.make_dataclass("SimulatorConf", spec)


SimulatorConf = _simulator_schema()
SimulatorConf.__module__ = __name__  # pickled by reference (submitit ships configs to jobs), not rebuilt


@dataclass
class StageTasksConf:
    # generated: the procedural world (the settings below); jsonl: a task file's train split (path=,
    # e.g. written by chorus.ingest)
    name: str = "generated"
    path: Optional[str] = None
    difficulty: Difficulty = Difficulty.easy
    per_family: int = 8
    seed: int = 0
    families: Optional[List[str]] = None
    prune: Optional[List[str]] = None  # as tasks.prune: design classes left out of the stage's data


@dataclass
class SFTStageConf:
    name: str = "stage0"
    init: Optional[str] = None  # previous stage, or null to start from model=...
    checkpoint: Optional[str] = None  # external checkpoint used instead of training
    tasks: StageTasksConf = field(default_factory=StageTasksConf)
    kinds: List[SFTKind] = field(default_factory=lambda: [SFTKind.validated])
    # where candidate answers come from: reference (the tasks' own programs), random (the uniform random
    # programs a measured target was set with), teacher (samples of sft_stage.teacher)
    candidates: List[CandidateSource] = field(default_factory=lambda: [CandidateSource.reference])
    teacher: TeacherConf = field(default_factory=TeacherConf)
    # a dataset folder (written by an earlier stage: <stage run dir>/data) to train on instead of
    # building the stage's data; its rows must name training tasks of sft_stage.tasks
    data: Optional[str] = None
    # which of a generated task's reference programs are candidate answers (each kept when it reaches
    # min_coverage; weaker ones pair with the best in repair examples)
    grades: List[Quality] = field(default_factory=lambda: list(Quality))
    # the task's stimulus strategies (tasks.difficulty=mixed) are candidates too: the teacher policy
    # writes every strategy, and those that pass are the validated answers
    strategies: bool = False
    # with strategies: the skills (exact, sweep, climb: tasks.generated.SKILLS) whose strategies are
    # validated answers; null = every skill. Stages given different skills learn different things
    skills: Optional[List[str]] = None
    # repair_from=own: the skills a repair's answer may use (null: those of `skills`); a repair can
    # teach a skill the stage's validated answers do not show
    repair_skills: Optional[List[str]] = None
    min_coverage: Optional[float] = 80.0  # null: the task's own target (its pass rule)
    repair_from: RepairSource = RepairSource.reference  # own: repairs start from the starting model's failures
    own_samples: int = 4  # repair_from=own: samples per task drawn from the starting model
    prioritised: bool = False
    # prioritised: samples per task the starting model's coverage is averaged over (with repair_from=own and
    # own_samples >= this, the first of the own samples, simulated once for both)
    prioritise_samples: int = 1
    steps: int = 200
    batch_size: int = 4
    lr: float = 1e-3
    warmup_steps: int = 20
    max_tokens: int = 4096
    max_new_tokens: int = 256
    max_prompt_tokens: int = 3072  # prompts are shortened (RTL, then spec) to this, as at generation time
    evaluate: bool = True  # score the stage checkpoint on rl.eval_tasks like an expert (per_task + summary)


@dataclass
class RLAlgoConf:
    """An RL algorithm's settings. The defaults are plain GRPO (symmetric clip, no KL, every group
    kept, no length shaping); conf/rl_algo/<name>.yaml states what its algorithm changes (DAPO:
    clip-higher, dynamic sampling, soft overlong punishment). Its advantage and loss aggregation are
    not settings: rl/algos.py keeps them per name."""
    name: str = "grpo"
    eps_low: float = 0.2  # PPO clip range: ratio in [1 - eps_low, 1 + eps_high]
    eps_high: float = 0.2
    kl_coef: float = 0.0  # > 0 loads a frozen reference (GRPO's k3 KL)
    dynamic_sampling: bool = False  # drop groups whose rewards all tie and refill the batch
    std_threshold: float = 1e-3  # dynamic sampling keeps groups whose reward std is above this
    max_refills: int = 2  # dynamic sampling's bounded refill
    overlong_buffer: int = 0  # tokens of DAPO's soft overlong buffer; 0 = off


@dataclass
class TrainerConf:
    name: str = "cpu"
    accelerator: str = "cpu"
    devices: Any = 1
    num_nodes: int = 1
    strategy: str = "auto"
    precision: str = "32-true"
    # strategy=fsdp only (FSDP2, chorus/fsdp.py): keep the parameter shards, their gradients and AdamW's
    # states in CPU memory and move each decoder layer to the GPU for its compute only; for a model whose
    # shards, gradients and optimizer states do not fit the GPUs (e.g. Qwen3-8B full fine-tuning on few
    # devices), at the cost of host-device copies every pass and an optimizer step on the CPU
    fsdp_cpu_offload: bool = False
    # activation checkpointing of the trained policy's layers (RL, OPD, SFT; non-reentrant): most of the
    # activations' memory for about a third more compute. null = on where training runs on a GPU
    gradient_checkpointing: Optional[bool] = None
    # completion positions whose vocabulary-wide logits exist at once in an update (rl/logprobs.py): at
    # a 151,936-token vocabulary each position is 0.6 MB in fp32
    logit_chunk: int = 1024
    # run each update pass's rows as one unpadded row (position ids restarting per row, no attention mask;
    # rl/packing.py): the same log-probs without computing padding, and flash attention's varlen kernels.
    # null = where the model separates packed rows (checked once) and it computes no more than padding:
    # always under flash/flex attention; under sdpa/eager, which score every token pair of the pack,
    # when tokens^2 <= rows x longest^2. true = every pass (refused where the model cannot); false = padded
    pack_sequences: Optional[bool] = None
    # AdamW as torch's fused kernel (one kernel over all parameters; foreach's transient copies of every
    # state tensor cost ~15 GiB at 4B). null = where training runs on a GPU (not under 16-mixed, whose
    # gradient scaler a fused step would own); true = wherever torch has the kernel, the CPU included
    # (refused where it has none); false = foreach. Clipping works with it (chorus/optimizer.py)
    fused_optimizer: Optional[bool] = None
    # saved checkpoints (SFT stages, merges, chorus.evaluate's) are evaluated with weights in model.dtype
    # (read as they are, as RL's bf16 inference copy samples), not float32. null = where training runs
    # on a GPU; true = on any device, the CPU included (heldout.evaluation_dtype)
    eval_in_model_dtype: Optional[bool] = None
    # any other argument of Lightning's Trainer (+trainer.extra.accumulate_grad_batches=4), checked against
    # its signature; those chorus sets itself are refused with the setting that owns them (trainer_setup)
    extra: Dict[str, Any] = field(default_factory=dict)
    # Lightning callbacks, each {_target_: module.Class, <argument>: <value>}, after chorus's own
    callbacks: List[Any] = field(default_factory=list)


@dataclass(unsafe_hash=True)  # hashable: it is a default argument and field value (rl/rewards, rl/rollouts);
class RewardConfig:              # not frozen: Hydra must merge overrides into it
    """rl.reward: what rl/rewards.reward adds to a sample's coverage in [0, 1]."""
    compile_penalty: float = 0.0  # added when the stimulus did not run (compile error, rejected, ...)
    empty_penalty: float = -0.1  # added for stimulus that drives nothing (an RL exploit seen here)
    pass_bonus: float = 0.0  # added when the task's target is reached


@dataclass
class LoraConf:
    r: int = 0  # 0 = full fine-tuning; > 0 trains a LoRA adapter of this rank
    alpha: int = 16
    dropout: float = 0.0
    target_modules: Optional[List[str]] = None


@dataclass
class RLConf:
    steps: int = 30  # rollout iterations (Lightning's global_step and max_steps count these)
    # optimizer steps per rollout and pass: the rollout is cut into this many mini-batches, each with its
    # own token-mean normaliser (DAPO/verl: several; the PPO ratio moves away from 1 after the first, so
    # the clip acts). 1 = one step per rollout: group-baselined REINFORCE with DAPO's aggregation, whose
    # clip never acts
    mini_batches: int = 4
    epochs: int = 1  # passes over the rollout (each pass: mini_batches optimizer steps)
    prompts_per_step: int = 4
    # prompts the hf engine samples in one batch (each with all its samples) in rollouts, held-out
    # evaluations (the merges' and SFT stages' too), OPD's teacher estimates and an SFT stage's draws
    # of its starting model (repair_from=own, prioritised): larger batches sample faster on a CPU (the
    # tiny preset sets 16: 1.5x the samples/s of 4 at 4 samples each) and need more memory on a GPU
    prompts_per_generate: int = 4
    group_size: int = 8
    # sequences per forward/backward; null = auto: the most that the memory plan (chorus/memory_plan.py)
    # fits on the device found (a GPU's memory, plan_device_gib, or on a CPU the machine's), at most a
    # mini-batch's rows, printed with the plan; a number always wins
    micro_batch: Optional[int] = None
    # when set: a forward/backward takes as many consecutive rows as fit in this many tokens (rows x the
    # longest of them; verl's token-budget micro-batches), instead of rl.micro_batch rows
    micro_tokens: Optional[int] = None
    lr: float = 2e-4
    weight_decay: float = 0.0
    warmup_steps: int = 2  # rollouts of linear LR warmup (the schedule steps once per rollout)
    grad_clip: float = 1.0
    max_new_tokens: int = 256
    temperature: float = 1.0
    max_prompt_tokens: int = 3072
    engine: Engine = Engine.hf  # vllm is required under trainer=fsdp
    # engine=vllm: the share of the GPU's memory vLLM takes (weights + KV cache). It shares the GPU with
    # the trainer's fp32 masters and AdamW state (~16 bytes per parameter): TRL's colocated default,
    # not measured here
    vllm_memory: float = 0.3
    # engine=vllm: sleep after each rollout (weights to the CPU, KV cache dropped) so the update has the
    # GPU's memory; the weight sync after the update wakes it
    vllm_sleep: bool = True
    # engine=vllm: truncated importance sampling (TRL, verl): each token's loss is weighted by
    # min(pi_trainer / pi_vllm, cap) of the old policy, correcting for the two engines' numerics; null = off
    tis_cap: Optional[float] = 2.0
    # engine=hf (rollouts, held-out evaluations, OPD teachers): shared (plain's forward, each prompt
    # prefilled once for its samples, KV in growing buffers: plain's tokens, 2x+ faster on the tiny
    # model) | plain | static (static KV cache, compiled decoding on CUDA) | auto (static on CUDA,
    # shared elsewhere). Not static: its compiled CUDA path has never run
    generation: GenerationMode = GenerationMode.shared
    # engine=hf: sample rollouts and held-out evaluations from a copy of the policy in model.dtype,
    # refreshed in place after each update, instead of the fp32 masters under autocast (whose cast cache
    # is off in Lightning 2.6: every weight is cast again at every decode step). Costs model.dtype's
    # bytes per parameter on the device (2 in bf16); its samples get rl.tis_cap's weights, as vLLM's.
    # auto: on when the trainer trains on a GPU in 16-bit mixed precision and model.dtype is 16-bit;
    # on | off. Under LoRA the copy holds the merged weights (base + adapter)
    inference_copy: InferenceCopyMode = InferenceCopyMode.auto
    lora: LoraConf = field(default_factory=LoraConf)
    reward: RewardConfig = field(default_factory=RewardConfig)
    # the training and held-out halves of the same generated designs
    tasks: TasksConf = field(default_factory=lambda: TasksConf(name="generated", seed=100, split=Split.train))
    eval_tasks: TasksConf = field(default_factory=lambda: TasksConf(name="generated", seed=100, split=Split.test))
    eval_every: int = 0  # steps between held-out evaluations; 0 = only at the end
    # null = rl.steps rollouts; else as many as draw every training task this many times (rounded up)
    passes: Optional[float] = None
    # steps between validation evaluations that choose the weights the run exports and evaluates (the
    # init, step 0, and the last step always among them; highest Pass@1, earliest of equals:
    # rl/selection.py); 0 = the last step's weights. The validation tasks: rl.eval_tasks with
    # split=validation, rl.select_samples samples each
    select_every: int = 0
    select_samples: int = 4
    eval_samples: int = 2
    # held-out sampling temperature; null = rl.temperature. Keep it equal across compared runs, e.g.
    # OPD trains at T=1 while experts may train at T=0.5
    eval_temperature: Optional[float] = None
    # steps between weights-only snapshots, ckpt/weights-step=N.ckpt (no optimizer state: 4 bytes per
    # parameter, kept); 0 = none. They never replace the resume point
    save_every: int = 5
    # steps between writes of the one resume point, ckpt/last.ckpt (weights, AdamW state, LR schedule,
    # data position: ~12 bytes per parameter, ~48 GB at 4B); a SIGTERM/SIGINT also writes it at the step
    # under way, so this bounds only what a hard kill (OOM, lost node) redoes. 4 x save_every: a quarter
    # of the optimizer writes of a resume point every save_every
    resume_every: int = 20
    resume: bool = True  # continue from <run>/ckpt/last.ckpt when it exists
    # dtype of the exported hf/ policy (RL experts, OPD students); null = the trained precision, fp32
    # (policies train fp32 masters whatever model.dtype says, and merges need the small task vectors
    # that bf16 rounding erases). bfloat16 halves the files.
    export_dtype: Optional[str] = None


@dataclass
class ConsolidationConf:
    """consolidation=none (job=sft or job=rl runs). Each method's settings are a schema of its own below
    (MergeConf's methods, OPDConf), so a setting another method reads is refused when composed."""
    name: str = "none"  # none | soup | task_arithmetic | ties | dare | della | opd


# The merges (chorus/merge/methods.py MERGES). As mergekit's methods declare theirs, each method's schema
# is its parameter list: what a merge job reads, hashes into its run name and passes to the method.
@dataclass
class MergeConf(ConsolidationConf):
    """soup: the (weighted) mean of the experts' weights."""
    weights: Optional[List[float]] = None  # one per teacher; null = equal


@dataclass
class _Scaled:
    lam: float = 1.0  # scale of the merged task vector


@dataclass
class _Normalized:
    # divide the weighted sum of task vectors by the sum of the weights; the experts start from nested
    # SFT stages, so a plain sum (false, as the papers do) counts stage1's SFT change once per expert
    # that inherited it (methods.combine). della: divide the disjoint sum by the weight agreeing before
    # the drop, not after it (methods.della)
    normalize: bool = True


@dataclass
class _Sparsified:
    density: float = 0.5  # fraction of each task vector kept


@dataclass
class _Dropped:
    seed: int = 0  # the drop masks


@dataclass
class TaskArithmeticConf(MergeConf, _Scaled, _Normalized):
    """task_arithmetic: base + lam x the (weighted) sum of task vectors."""


@dataclass
class TiesConf(MergeConf, _Scaled, _Sparsified):
    """ties: trim each task vector to its top-density magnitudes, elect signs, disjoint mean."""


@dataclass
class DareConf(MergeConf, _Scaled, _Normalized, _Sparsified, _Dropped):
    """dare: drop each task vector's entries at random (keep density), rescale, sum."""


@dataclass
class DellaConf(MergeConf, _Scaled, _Normalized, _Sparsified, _Dropped):
    """della: magnitude-ranked drop probabilities in a window of width epsilon, then TIES's election."""
    epsilon: float = 0.1  # width of the drop-probability window


MERGE_SCHEMAS = {"soup": MergeConf, "task_arithmetic": TaskArithmeticConf, "ties": TiesConf, "dare": DareConf,
                 "della": DellaConf}


@dataclass
class OPDConf(ConsolidationConf):
    """Adaptive multi-teacher OPD (chorus/opd/): the paper's rule (per task the teacher with the best
    pass rate on its reward table, distilled on the student's own samples only where it beats the
    student; other tasks skipped) and the settings of the design the next study runs (study.yaml;
    docs/results.md, "OPD's fourth design"). Designs that lost are presets over these
    (conf/experiment/opd/) or name the revision they ran at (docs/results.md)."""
    name: str = "opd"
    # soup | stage0|stage1|stage2 (SFT stages) | a checkpoint path; never one of the teachers (the
    # student distilling from itself is the own-teacher control: DAPO continuation, pipeline controls.opd_controls)
    student: str = "soup"
    weights: Optional[List[float]] = None  # student=soup: one per teacher; null = equal
    # gated (CHORUS: the best teacher, only where it beats the student) | random | no_gate (controls)
    routing: Routing = Routing.gated
    margin: float = 0.0  # a teacher must beat the student's pass rate by more than this
    # what the student reaches by RL alone, per training task: a reward table (a run dir or per_task
    # file; in a pipeline, a stage name: that stage's first expert's gate table). The gate compares each
    # teacher with the better of the student's own pass rate and this one, so a task DAPO from the
    # student would pass as often as the teacher is left to DAPO (null: the student's own)
    gate_reference: Optional[str] = None
    # a task no teacher beats the student on: skip (CHORUS) | rl (its samples train under DAPO's group
    # advantage and overlong penalty, as the own-teacher control trains every task)
    unrouted: Unrouted = Unrouted.skip
    # a routed task's own samples: distil (CHORUS: the teacher's per-token signal) | both (plus DAPO's
    # group advantage; needs unrouted=rl)
    routed: Routed = Routed.distil
    # per routed task, the routed teacher draws this many samples of its own (rl.temperature); those
    # beating the student's pass rate join the step as sequence-level KD targets (their NLL under the
    # student, after the student's rows, so the last mini-batches). 0 = off
    teacher_samples: int = 0
    teachers_in_memory: bool = True  # false loads one teacher at a time (memory, not results)

    def __post_init__(self):
        # The one place OPD's combinations are checked: whoever builds the settings (chorus.train through
        # OmegaConf.to_object, the pipeline's plan, a library caller) gets the same one-line refusals.
        if self.teacher_samples < 0:
            raise ValueError(f"consolidation.teacher_samples={self.teacher_samples} must be >= 0 (0: on-policy "
                             "distillation only)")
        if not self.margin >= 0:
            raise ValueError(f"consolidation.margin={self.margin} must be >= 0: a teacher is routed where it beats "
                             "the student by more than it")
        if str(self.routed) == "both" and str(self.unrouted) != "rl":
            raise ValueError("consolidation.routed=both adds DAPO's group advantage as unrouted=rl trains the other "
                             "tasks; set consolidation.unrouted=rl (or routed=distil)")


@dataclass
class Teacher:
    """One entry of teacher_pool.teachers, also what chorus.opd takes (opd/teachers.py)."""
    name: str
    checkpoint: str
    source: TeacherSource = TeacherSource.online
    rewards: Optional[str] = None  # source=table: a run dir or a per_task.parquet/jsonl


@dataclass
class TeacherPoolConf:
    name: str = "three_experts"
    base: Optional[str] = "${runs_dir}/sft/stage0/hf"  # the SFT init task vectors are taken against
    teachers: List[Teacher] = field(default_factory=list)
    # another runs dir (a pipeline's) whose experts and base the pool uses: each path under runs_dir is
    # looked up at the same group path there, plain or made with other settings (opd/teachers.pool_from_runs)
    from_runs: Optional[str] = None
    missing: MissingRewards = MissingRewards.error  # a reward table lacking training tasks
    online_samples: int = 4


@dataclass
class LoggerConf:
    name: str = "wandb"  # wandb | none
    project: str = "chorus"
    entity: Optional[str] = None
    mode: LogMode = LogMode.offline
    group: Optional[str] = None
    tags: List[str] = field(default_factory=list)


@dataclass
class PatternDesignConf:
    """analyze power=true design.statistic=pattern: the simulated crossed study (logit-scale sds;
    null = chorus.analysis.pattern_power.PatternDesign's default, matched to v1's runs)."""
    seeds: Optional[int] = None  # SFT chains
    rl_seeds: Optional[int] = None  # experts per stage and seed
    task_sd: Optional[float] = None
    rl_sd: Optional[float] = None
    seed_sd: Optional[float] = None


@dataclass
class DesignConf:
    """analyze power=true: the design whose minimum detectable headroom is simulated (chorus.analysis.power).
    A null setting is read from the loaded runs' experts (runs=, experts=)."""
    tasks: Optional[int] = None  # held-out tasks
    samples: Optional[int] = None  # samples per task and expert
    levels: Optional[List[float]] = None  # each expert's Pass@1, 0-1
    hi: Optional[float] = None  # an expert's pass rate on a task it solves (two-level model)
    lo: Optional[float] = None  # and on one it does not
    power: float = 0.8
    sims: Optional[int] = None  # simulated data sets per headroom tried; null: chorus.analysis.power.POWER_SIMS
    seed: int = 0
    # headroom: the minimum detectable oracle headroom (above); pattern: the minimum detectable stage
    # share of the study's primary test (chorus.analysis.pattern_power; levels' mean is its level)
    statistic: str = "headroom"
    pattern: PatternDesignConf = field(default_factory=lambda: PatternDesignConf())


@dataclass
class WandbFilterConf:
    """analyze wandb=<entity/project>: which of the project's runs to read."""
    group: Optional[str] = None  # a pipeline's runs dir (chorus's default W&B group)
    tags: List[str] = field(default_factory=list)  # every one of them (job=rl, model=tiny-xs, ...)
    job_type: Optional[str] = None  # sft, rl, consolidation, evaluate
    config: Dict[str, Any] = field(default_factory=dict)  # config values: {"rl.steps": 40}
    mixed: bool = False  # pool runs of several groups (different setups); refused otherwise


@dataclass
class AnalyzeConf:
    runs: str = "runs"  # a glob of run dirs, or a folder searched for run dirs
    wandb: Optional[str] = None  # entity/project: read the runs from W&B instead (online)
    wandb_filter: WandbFilterConf = field(default_factory=WandbFilterConf)
    out: Optional[str] = None  # plots and table.md; null = the Hydra run dir
    experts: Optional[List[str]] = None  # run labels forming the oracle union; null = the job=rl runs
    min_rate: float = 0.5  # a task is solved by a run when it passes in at least this share of samples
    k: int = 5  # pass@k column (when every task has k samples)
    pass_coverage: Optional[float] = None  # a sample passes at this coverage % instead of its task's target
    bootstrap: int = N_BOOT  # resamples over tasks for the confidence intervals
    alpha: float = 0.05
    seed: int = 0
    power: bool = False  # print the minimum detectable headroom of `design` instead of the table
    design: DesignConf = field(default_factory=DesignConf)
    # the staged study's pre-registered verdict over these runs_dirs (one per seed, each with the
    # controls.json of pipeline=study) instead of the table
    study: Optional[List[str]] = None
    # with study: first copy each seed's evidence (controls.json, each run's summary and per-task
    # table) to <study_keep>/<seed dir's name>, and read the verdict from those copies
    study_keep: Optional[str] = None
    # with study: roles a pre-registered amendment re-ran at another revision (families_opd, opd,
    # families/random ...): left out of the one-revision check, named in study.json and study.md
    study_amended: List[str] = field(default_factory=list)
    # an RL run dir trained with rl.eval_every=N: its learning curve on its held-out split and the RL
    # length chosen from it (chorus.analysis.learning_curve), printed and written to out/curve.{json,png}
    curve: Optional[str] = None


@dataclass
class SubmititConf:
    """pipeline.submitit: each step as a submitit job (pipeline.launcher=submitit). The names after
    `folder` are submitit's own executor parameters, passed as they are; None leaves a parameter to
    the cluster's default."""
    cluster: Optional[str] = None  # None: SLURM where sbatch is found, else local processes; local or slurm forces one
    folder: str = "${runs_dir}/pipeline/submitit"  # submitit's files per job: its pickles, stdout and stderr
    timeout_min: int = 1440  # a step running longer is killed (submitit's local executor would stop it at 2 min)
    slurm_partition: Optional[str] = None
    cpus_per_task: Optional[int] = None
    gpus_per_node: Optional[int] = None
    mem_gb: Optional[int] = None
    slurm_additional_parameters: Dict[str, Any] = field(default_factory=dict)  # more sbatch options: {account: x}


@dataclass
class ControlsConf:
    """pipeline.controls (issue 27): controls planned beside the pipeline's own steps, in its runs_dir,
    reported in REPORT.md's Controls section. Defaults: none."""
    # DAPO experts per SFT stage, each from its stage's SFT checkpoint with its own RL seed: stage i's
    # replicate j (from 0) gets seed + 1000 (i + 3 j), so no two experts share one and stage is
    # not confounded with RL seed; the merges, OPD and the report's table use each stage's first. >= 2: every stage's
    # experts are also its same-stage control (what RL-seed diversity alone gives)
    rl_seeds: int = 1
    # the secondary protocol: each stage's first expert evaluated again on the held-out tasks with this
    # many feedback turns (protocol=agentic, chorus.evaluate); 0 = none
    agentic_rounds: int = 0
    # positive control: one fine-tune of the stage-0 SFT checkpoint per family group (stage 0's
    # settings, then `family_sft`; only that group's designs, every skill), each made a DAPO expert; the
    # experts' soup, and OPD over them (the pipeline's OPD settings, then `opd`)
    families: List[List[str]] = field(default_factory=list)
    family_sft: List[str] = field(default_factory=list)
    opd: List[str] = field(default_factory=list)
    # OPD's controls, each one change from its OPD run (chorus/workflow/plan.py, opd_controls):
    # own_teacher (DAPO continuation of the same student, as long, on the same tasks), random (random
    # teacher where the gate routes), no_gate (always the best teacher). opd_controls: the positive
    # control's OPD; staged_opd_controls: the staged experts' OPD
    opd_controls: List[str] = field(default_factory=list)
    staged_opd_controls: List[str] = field(default_factory=list)


@dataclass
class PipelinePresetConf:
    name: str = "tiny"
    designs: bool = False  # the preset runs on your own designs: designs=<folder> (chorus.ingest) is required
    train: List[str] = field(default_factory=list)  # settings for the pipeline's chorus.train jobs that read them
    stages: Dict[str, List[str]] = field(default_factory=dict)  # per SFT stage: extra overrides
    rl: List[str] = field(default_factory=list)  # extra overrides for the RL (expert) jobs
    merges: List[str] = field(default_factory=lambda: ["soup", "ties", "della"])
    merge: List[str] = field(default_factory=list)  # extra overrides for every merge job
    opd: List[str] = field(default_factory=list)  # extra overrides for the OPD job
    # OPD's gate reads each teacher's table from an evaluation on the training tasks with this many
    # samples per task (a tables/ step per expert, reused by every OPD run over it); 0 = estimated online
    teacher_samples: int = 8
    controls: ControlsConf = field(default_factory=ControlsConf)
    k: int = 2  # pass@k column of the report
    bootstrap: int = N_BOOT  # resamples over tasks for the report's intervals
    launcher: Launcher = Launcher.local  # how steps start: local subprocesses, or submitit jobs (SLURM)
    submitit: SubmititConf = field(default_factory=SubmititConf)


@dataclass
class StageCheckpointsConf:
    stage0: Optional[str] = None  # a path or hub id used instead of training that SFT stage
    stage1: Optional[str] = None
    stage2: Optional[str] = None


@dataclass
class PipelineConf:
    pipeline: Any = None
    seed: int = 0
    runs_dir: str = "runs/pipeline"
    jobs: int = 2  # steps run at once (the SFT chain, the experts, merges and OPD overlap where they can)
    threads: int = 1  # torch threads per job (OMP_NUM_THREADS)
    checkpoints: StageCheckpointsConf = field(default_factory=StageCheckpointsConf)  # real SFT stages
    # a folder of your own designs (chorus.ingest): ingested first into <runs_dir>/tasks/; every stage and
    # expert then trains on its train split and every evaluation scores its test split (pipeline=own_designs)
    designs: Optional[str] = None
    ingest: IngestOptions = field(default_factory=IngestOptions)
    extra: List[str] = field(default_factory=list)  # appended to every job: trainer=gpu, model=hf, ...


@dataclass
class TrainConf:
    sft_stage: Any = None
    rl_algo: Any = None
    trainer: Any = None
    consolidation: Any = None
    teacher_pool: Any = None
    model: Any = None
    format: Any = None
    simulator: Any = None
    logger: Any = None
    rl: RLConf = field(default_factory=RLConf)
    job: str = "auto"  # auto = consolidate when consolidation != none, else sft
    runs_dir: str = "runs"
    run_tag: str = ""  # a readable label in the run dir name (<name>-<tag>[-<hash>]), e.g. the W&B run id of a sweep
    seed: int = 0
    pass_coverage: Optional[float] = None  # evaluations: a sample passes at this coverage % instead of its target
    # print the job's per-device memory plan (chorus/memory_plan.py) and exit; GPU jobs print it anyway
    # and refuse a plan that exceeds the device
    plan_only: bool = False
    plan_device_gib: Optional[float] = None  # the device the plan is for; null: the job's CUDA device
    # RL and OPD: a Lightning checkpoint to start from (its step, optimizer state and data position);
    # the run dir's own last.ckpt still wins when it has one (rl.resume)
    ckpt_path: Optional[str] = None


@dataclass
class EvaluateConf:
    tasks: Any = None
    policy: Any = None
    format: Any = None
    model: Any = None
    protocol: Any = None
    simulator: Any = None
    logger: Any = None
    n_samples: int = 1
    progress: bool = True
    pass_coverage: Optional[float] = None  # a sample passes at this coverage % instead of its task's target


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="evaluate_schema", node=EvaluateConf)
    cs.store(name="ingest_schema", node=IngestConf)
    cs.store(name="train_schema", node=TrainConf)
    cs.store(name="analyze_schema", node=AnalyzeConf)
    cs.store(name="pipeline_schema", node=PipelineConf)
    cs.store(group="pipeline", name="pipeline_preset_schema", node=PipelinePresetConf)
    cs.store(group="logger", name="logger_schema", node=LoggerConf)
    cs.store(group="sft_stage", name="sft_stage_schema", node=SFTStageConf)
    cs.store(group="rl_algo", name="rl_algo_schema", node=RLAlgoConf)
    cs.store(group="trainer", name="trainer_schema", node=TrainerConf)
    cs.store(group="consolidation", name="consolidation_schema", node=ConsolidationConf)
    for name, schema in MERGE_SCHEMAS.items():
        cs.store(group="consolidation", name=f"{name}_schema", node=schema)
    cs.store(group="consolidation", name="opd_schema", node=OPDConf)
    cs.store(group="teacher_pool", name="teacher_pool_schema", node=TeacherPoolConf)
    cs.store(group="tasks", name="tasks_schema", node=TasksConf)
    cs.store(group="policy", name="policy_schema", node=PolicyConf)
    cs.store(group="format", name="format_schema", node=FormatConf)
    cs.store(group="model", name="model_schema", node=ModelConf)
    cs.store(group="protocol", name="protocol_schema", node=ProtocolConf)
    cs.store(group="simulator", name="simulator_schema", node=SimulatorConf)
