"""What an RL (or OPD) run does around Lightning's loop, as named steps: the policy it loads, and the
hooks the module calls (draw a rollout, start the sampler, record a step, validate). train_rl
(rl/run.py) wires them; the module (rl/module.py) calls them."""
from __future__ import annotations

import dataclasses
import json
import logging
import warnings
from dataclasses import dataclass
from typing import Callable

import lightning as L

from ..config.job_context import JobContext
from ..config.schema import RLConf
from ..heldout import evaluate_policy
from ..policy.engines import make_engine
from ..policy.inference_copy import InferenceCopy
from ..policy.models import load_model, torch_dtype
from ..tracking.timing import add_seconds
from .algos import RLAlgo
from .module import Hooks
from .rollouts import RolloutSpec
from .selection import Selection
from .task_sampler import TaskSampler

log = logging.getLogger("chorus.rl")


@dataclass
class Policy:
    """The trained policy and what is loaded beside it: its tokenizer, the frozen reference (KL), the
    LoRA settings and the model.dtype inference copy the hf engine samples from (rl.inference_copy)."""
    model: object
    tokenizer: object
    ref: object = None
    lora: dict | None = None
    inference: InferenceCopy | None = None


def load_policy(init: str, algo: RLAlgo, rl: RLConf, dtype: str, use_copy: bool) -> Policy:
    """The policy keeps fp32 master weights whatever model.dtype says: AdamW on bf16 parameters rounds
    most small updates away (at lr 1e-6 only ~1 % of the weights moved). The trainer's precision
    (bf16-mixed on GPUs) autocasts the compute; `dtype` is for what is not trained: the reference model,
    a vLLM engine, teachers, evaluation copies and LoRA's frozen base (its adapter stays fp32: peft casts
    adapters to fp32 over a bf16 base)."""
    lora = dataclasses.asdict(rl.lora) if rl.lora.r > 0 else None
    model, tok = load_model("hf", path=init, dtype=dtype if lora else "float32", lora=lora)
    ref = None
    if algo.needs_reference and not lora:
        ref, _ = load_model("hf", path=init, dtype=dtype)
        ref.requires_grad_(False)
    inference = InferenceCopy(model, torch_dtype(dtype)) if use_copy else None
    if inference:
        log.info("inference copy in %s: %.2f GiB", dtype, inference.nbytes() / 2**30)
    return Policy(model, tok, ref, lora, inference)


@dataclass
class RunLoop:
    """The hooks of one run. Ranks are read from `fit` when a hook is called, not when the loop is
    built: under a spawning strategy a process learns its rank only once fit starts."""
    init: str
    rl: RLConf
    ctx: JobContext
    policy: Policy
    sampler: TaskSampler
    spec: RolloutSpec
    fit: L.Trainer
    pool: object  # the simulator executor
    collect: Callable  # Objective.collect
    log_batch: Callable | None
    eval_tasks: list
    select_tasks: list | None
    selection: Selection | None
    engine: object = None  # the generation engine; a vLLM run builds its own at train start
    make_vllm: Callable | None = None  # (loop) -> the vLLM engine
    weight_sync: Callable | None = None  # (engine) -> (model) -> None

    @property
    def vllm(self) -> bool:
        return self.rl.engine == "vllm"

    def draw(self, k: int) -> list:
        return self.sampler.draw_share(k, self.fit.world_size, self.fit.global_rank)

    def rollout(self, step: int):
        """One step's batch. A vLLM engine sleeps once the samples are drawn: its memory goes to what
        follows (OPD's teachers, the update); the weight sync after the update wakes it."""
        sleep = self.engine.sleep if self.vllm and self.rl.vllm_sleep else (lambda: None)
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            seed = self.ctx.seed * 1_000_003 + step * 101 + self.fit.global_rank
            return self.collect(self.draw, self.engine, self.policy.tokenizer, self.pool, self.spec,
                                self.rl.prompts_per_step, seed=seed, after_generation=sleep)

    def start_vllm(self, model) -> None:
        """At train start (after the process group, after a resume's restore): the engine, synced to
        the weights it trains from (the init's or the restored ones)."""
        if self.engine is None:
            self.engine = self.make_vllm(self)
        self.weight_sync(self.engine)(model)

    def start_sampler(self, model) -> None:
        if self.vllm:
            self.start_vllm(model)
        elif self.policy.inference:
            self.policy.inference.place(model)

    def start(self, model) -> None:
        """Lightning's train start: the sampler, then (rl.select_every) the init's validation point."""
        self.start_sampler(model)
        if self.selection and self.fit.global_step == 0 and not any(r["step"] == 0 for r in self.selection.curve()):
            self.validate(0, model)

    def sync(self, model) -> None:
        """After each update: the sampler's weights follow the trained ones."""
        if self.vllm:
            self.weight_sync(self.engine)(model)
        elif self.policy.inference:
            self.policy.inference.refresh(model)

    def validate(self, step: int, model) -> None:
        """rl.select_every: one point of the validation curve."""
        was_training = model.training
        model.eval()
        summary = evaluate_policy(self.engine, self.policy.tokenizer, self.select_tasks,
                                  dataclasses.replace(self.rl, eval_samples=self.rl.select_samples), self.ctx,
                                  out_dir=self.selection.dir / f"step_{step}", phase=f"validation at step {step}")
        self.selection.record(step, summary, model)
        model.train(was_training)

    def after_step(self, step: int, batch, stats: dict) -> None:
        """A step's record (the log line, timing, steps.jsonl, rollouts.jsonl, the objective's own log, the
        job's callback), then its validation or held-out evaluation when one is due."""
        rl, out = self.rl, self.ctx.out
        log.info("step %d/%d reward %.3f±%.3f compile %.2f pass %.2f distinct %.2f trained %d "
                 "gen %.1fs sim %.1fs update %.1fs", step, rl.steps, stats["reward_mean"], stats["reward_std"],
                 stats["compile_rate"], stats["pass_rate"], stats["distinct_ratio"], stats["samples_trained"],
                 stats["generation_s"], stats["simulation_s"], stats["update_s"])
        for kind, key in (("generation_s", "generation_s"), ("simulation_wait_s", "simulation_s"),
                          ("training_s", "update_s")):
            add_seconds(self.ctx.timing, kind, stats[key])
        with open(out / "steps.jsonl", "a") as f:
            f.write(json.dumps({"step": step, **stats}) + "\n")
        with open(out / "rollouts.jsonl", "a") as f:
            for r in batch.rows:
                f.write(json.dumps({"step": step, **r}) + "\n")
        if self.log_batch:
            self.log_batch(out, step, batch)
        if self.ctx.on_step:
            self.ctx.on_step(step, stats)
        model = self.policy.model
        if self.selection and step in self.selection.steps:
            self.validate(step, model)
        if rl.eval_every and step % rl.eval_every == 0 and step < rl.steps:
            model.eval()
            evaluate_policy(self.engine, self.policy.tokenizer, self.eval_tasks, rl, self.ctx,
                            out_dir=out / "eval" / f"step_{step}", phase=f"held-out evaluation at step {step}")
            model.train()

    def hooks(self) -> Hooks:
        needs_start = self.vllm or self.policy.inference or self.selection
        return Hooks(self.rollout, state=self.sampler.state_dict, restore=self.sampler.load_state_dict,
                     on_step=self.after_step,
                     sync_weights=self.sync if self.vllm or self.policy.inference else None,
                     start=self.start if needs_start else None)


def hf_engine(policy: Policy, rl: RLConf):
    """The hf engine a run samples with: on the inference copy, else on the trained policy."""
    return make_engine("hf", policy.inference.model if policy.inference else policy.model, policy.tokenizer,
                       generation=rl.generation)
