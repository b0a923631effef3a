"""Which settings each chorus.train job reads.

A setting a job does not read must not be accepted silently: `consolidation=opd rl_algo.eps_high=0.5`
or `job=sft model.dtype=bfloat16` would otherwise be recorded in the run's config as if they had shaped it.
The same lists decide a run's identity (config/run_identity.py) and which of a pipeline preset's
settings reach which step, so "what a job uses" is written down once, here.

Entries are dotted prefixes of the composed train config: `rl` covers every `rl.*` key.
"""
from __future__ import annotations

import dataclasses
import difflib

from omegaconf import DictConfig, OmegaConf

from .schema import MERGE_SCHEMAS, OPDConf

OPD_SETTINGS = [f.name for f in dataclasses.fields(OPDConf) if f.name != "name"]

# Read by every job, but never part of what a run computes (where it writes, how it logs, the scoring
# budget of a sample): left out of run identity, so adding one keeps every existing run dir valid.
BOOKKEEPING = ("job", "runs_dir", "run_tag", "logger", "hydra", "simulator.workers", "rl.resume", "rl.save_every",
               "rl.resume_every", "simulator.scoring_mem_mb", "simulator.scoring_cpu_s",
               "simulator.check_timeout_s", "simulator.check_mem_mb", "plan_only", "plan_device_gib",
               # how a teacher is reached, not what it answers (its completions are cached by what decides them)
               *(f"sft_stage.teacher.{k}" for k in ("api_key_env", "api_concurrency", "api_max_retries", "api_backoff_s",
                                                    "api_timeout_s", "api_cache", "threads")))
# Groups that only set other settings (conf/experiment/): what they set is checked as composed.
PRESETS = ("experiment",)
COMMON = ("seed", "format", "simulator", "model", "pass_coverage")
# A held-out evaluation (heldout.eval_sampling and evaluate_checkpoint read these; model.dtype: what a
# checkpoint is evaluated in on a GPU or with trainer.eval_in_model_dtype, heldout.evaluation_dtype).
EVALUATION = ("model.dtype", "rl.eval_tasks", "rl.eval_samples", "rl.eval_temperature", "rl.temperature",
              "rl.max_new_tokens", "rl.max_prompt_tokens", "rl.generation", "rl.prompts_per_generate")
# The teacher location in conf/teacher_pool/*.yaml follows ${rl_algo.name}; the algorithm's other
# settings belong to job=rl.
TEACHERS = ("teacher_pool.name", "teacher_pool.teachers", "teacher_pool.from_runs", "rl_algo.name")
# Why a job refuses a setting people commonly pass it: (job, top-level key) -> a clause.
UNUSED_HINTS = {
    ("sft", "model"): " (SFT trains float32 weights, and only a stage's held-out evaluation reads model.dtype; "
                      "trainer.precision sets its compute)",
    ("evaluate", "model"): " (only policy=model loads a model)",
    ("evaluate", "protocol"): " (only policy=model generates)",
    ("consolidation", "rl_algo"): " (rl_algo only selects the experts the teacher pool reads; OPD's own clip "
                                  "range is fixed in rl/algos.py)",
}


# SFT trains fp32 masters whatever model.dtype says, and a merge computes in float32 in the experts'
# dtype: the model group without dtype. Their held-out evaluations read model.dtype (EVALUATION).
MODEL_BUT_DTYPE = ("model.name", "model.path", "model.size", "model.seed", "model.pretrain_steps", "model.device",
                   "model.attn_implementation")
FLOAT32 = [k for k in COMMON if k != "model"] + list(MODEL_BUT_DTYPE)


def _sft(c: dict) -> list[str]:
    # trainer: where (and in what precision) the stage trains and evaluates; a registered checkpoint
    # that is not evaluated runs nothing. model.dtype: only the stage's evaluation reads it.
    stage = c["sft_stage"]
    uses = ["sft_stage", *FLOAT32]
    if stage.get("prioritised") or (stage.get("repair_from") == "own" and "repair" in stage.get("kinds", ())):
        uses.append("rl.prompts_per_generate")  # the starting model's own samples: tasks a generate call
    if not stage.get("checkpoint") or stage["evaluate"]:
        uses.append("trainer")
    return uses + list(EVALUATION) if stage["evaluate"] else uses


def _rl(c: dict) -> list[str]:
    # The expert starts from its stage's checkpoint (sft_stage.checkpoint, else the stage's run dir).
    return [*COMMON, "rl", "rl_algo", "trainer", "sft_stage.name", "sft_stage.checkpoint", "ckpt_path"]


def _merge(c: dict) -> list[str]:
    # trainer: the merge is evaluated on its device and precision, like the experts it merges. Every
    # setting under consolidation is the method's own (its schema: MergeConf and the per-method ones)
    uses = [*FLOAT32, *EVALUATION, *TEACHERS, "trainer", "consolidation"]
    return uses + ["teacher_pool.base"] if c["consolidation"]["name"] != "soup" else uses


def _opd(c: dict) -> list[str]:
    # every setting under consolidation is OPD's own (OPDConf); the soup student's weights only with it
    uses = [*COMMON, *TEACHERS, "rl", "trainer", "teacher_pool", "ckpt_path",
            *(f"consolidation.{k}" for k in ["name", *OPD_SETTINGS] if k != "weights")]
    return uses + ["consolidation.weights"] if c["consolidation"]["student"] == "soup" else uses


# chorus.evaluate: each policy's own settings (the rest of `policy.*` is refused for it).
POLICY_OPTIONS = {"reference": ("quality",), "file": ("dir",), "random": ("cycles", "seed"),
                  "model": ("engine", "generation", "max_new_tokens", "temperature", "top_p", "top_k",
                            "max_prompt_tokens", "threads", "seed", "api_base_url", "api_model", "api_key_env",
                            "api_concurrency", "api_max_retries", "api_backoff_s", "api_timeout_s", "api_extra_body",
                            "api_cache")}


def _evaluate(c: dict) -> list[str]:
    policy = c["policy"]["name"]
    uses = ["tasks", "format", "simulator", "n_samples", "progress", "pass_coverage", "policy.name",
            *(f"policy.{k}" for k in POLICY_OPTIONS.get(policy, ()))]
    return uses + ["model", "protocol"] if policy == "model" else uses


def used_settings(job: str, c: dict) -> list[str]:
    """The dotted prefixes of the composed config `c` (a plain dict) that `job` reads."""
    if job == "evaluate":
        return _evaluate(c)
    if job == "sft":
        return _sft(c)
    if job == "rl":
        return _rl(c)
    if c["consolidation"]["name"] == "opd":
        return _opd(c)
    if c["consolidation"]["name"] in MERGE_SCHEMAS:
        return _merge(c)
    raise ValueError(f"unknown consolidation {c['consolidation']['name']!r}; "
                     f"choose one of {sorted([*MERGE_SCHEMAS, 'opd', 'none'])}")


def _covers(prefix: str, key: str) -> bool:
    return key == prefix or key.startswith(prefix + ".")


def is_used(key: str, uses: list[str]) -> bool:
    """`key` is a setting (`rl.lr`) or a group choice (`trainer`): used when a used prefix covers it,
    or, for a group, when the job reads anything inside it."""
    return any(_covers(u, key) or _covers(key, u) for u in [*uses, *BOOKKEEPING, *PRESETS])


def override_key(override: str) -> str:
    """`+consolidation.densty=0.3` -> consolidation.densty; `~x.y` -> x.y; list indices stay dotted."""
    key = override.split("=", 1)[0].lstrip("+~")
    return key.split("@", 1)[0]


def has_setting(c: dict, key: str) -> bool:
    """Whether the composed config `c` (plain data) has `key`: a group choice (no dot) always does; a
    dotted key when every part of it exists (a list index included)."""
    if "." not in key:
        return True
    node = c
    for part in key.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


def unused_overrides(job: str, c: dict, overrides: list[str]) -> list[str]:
    """The overrides (as typed) that `job` would ignore."""
    uses = used_settings(job, c)
    return [o for o in overrides if not is_used(override_key(o), uses)]


def unknown_keys(node: DictConfig, path: str = "") -> list[str]:
    """Keys of a composed config that its structured schema does not define, e.g. a typo added with
    `+consolidation.densty=0.3` (Hydra's own error suggests the `+`), each with the nearest known key."""
    found = []
    schema = OmegaConf.get_type(node)
    fields = {f.name for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else None
    for key in node.keys():
        where = f"{path}{key}"
        if fields is not None and key not in fields:
            near = difflib.get_close_matches(str(key), fields, n=1)
            found.append(where + (f" (did you mean {path}{near[0]}?)" if near else ""))
            continue
        value = node._get_node(key)
        if isinstance(value, DictConfig) and not value._is_missing() and not value._is_none():
            found += unknown_keys(value, where + ".")
    return found


def check_settings(job: str, label: str, c: dict, cfg: DictConfig, overrides: list[str]) -> None:
    """One-line refusals of keys the schema does not know and of overrides `job` would ignore;
    `label` names the job in the message (job=sft, consolidation=ties, policy=reference)."""
    unknown = unknown_keys(cfg)
    if unknown:
        raise ValueError(f"unknown setting {unknown[0]}")
    unused = unused_overrides(job, c, overrides)
    if unused:
        hint = UNUSED_HINTS.get((job, override_key(unused[0]).split(".")[0]), "")
        raise ValueError(f"{label} does not use {unused[0]}{hint}; drop it")
