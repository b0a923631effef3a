"""The RL LightningModule (manual optimisation). One training step = one rollout iteration:
the rollout (generation + simulation) runs in `on_train_batch_start`, outside `training_step`.
The step recomputes the old log-probs with the policy itself (no grad, sampling temperature), then
takes rl.epochs x rl.mini_batches optimizer steps (DAPO/PPO): each mini-batch is micro-batched
forward/backward passes under one normaliser for that mini-batch, clipped by chorus/optimizer.py's
`clip_grad_norm`. Lightning's global_step (and so max_steps, save_every, resume) counts
rollouts; the LR schedule steps once per rollout. Under DDP every rank runs the same schedule of
backward passes and optimizer steps whatever rows it kept (`_plan`), so no collective waits forever;
under FSDP (chorus/fsdp.py) every forward is a collective too, so the old log-probs' forwards are
padded the same way."""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Callable

import lightning as L
import torch
from torch.distributed.fsdp import FSDPModule

from ..config.schema import RLConf, TrainerConf
from ..optimizer import adamw, clip_grad_norm
from .algos import RLAlgo
from .logprobs import Forward, forward_logprobs
from .losses import (clipped_pg_loss, k3_kl, micro_slices, minibatch_counts, minibatch_normalizers, minibatch_slices,
                     tis_weights)
from .packing import pass_tokens, why_not_packable
from .rollouts import RolloutBatch


def sync_engine(optimizer, model, sync: Callable) -> None:
    """The weight sync after an update, with the update's memory freed first: its gradients (set to
    None; on_train_batch_start would free them only before the next rollout) and, on CUDA, the
    blocks PyTorch's cache still holds from the update's peak. A sleeping vLLM engine maps its
    memory outside PyTorch's allocator when the sync wakes it, so memory PyTorch keeps cached is
    memory vLLM cannot have (vLLM issue 15254: the OOM at the first wake after an update). The same
    calls on every device: torch's empty_cache does nothing where CUDA was never initialised."""
    optimizer.zero_grad(set_to_none=True)
    torch.cuda.empty_cache()
    sync(model)


@dataclass
class Hooks:
    """What the runner plugs into the module: the module owns the update, the runner the data."""
    rollout: Callable[[int], RolloutBatch]  # global step -> the step's batch (generation + simulation)
    state: Callable[[], dict] | None = None  # the data position, saved in each checkpoint
    restore: Callable[[dict], None] | None = None  # ... and restored on resume
    on_step: Callable[[int, RolloutBatch, dict], None] | None = None  # after each update, on rank 0
    # after each update: a separate sampler (vLLM, or the hf engine's inference copy) gets the new
    # weights; set exactly when the samples do not come from the trained weights themselves (_tis)
    sync_weights: Callable[[torch.nn.Module], None] | None = None
    # at train start, with the weights training starts from (a vLLM engine is built, then synced; an
    # inference copy moves beside the policy and loads them)
    start: Callable[[torch.nn.Module], None] | None = None


@dataclass
class _Plan:
    """One rollout's update schedule, identical on every rank (see RLModule._plan)."""
    parts: list[slice]  # this rank's rows of each mini-batch
    normalizers: list[float]  # each mini-batch's loss normaliser (over all ranks, / world size)
    micro: list[int]  # forward/backward passes of each mini-batch on every rank
    slices: list[list[slice]]  # this rank's passes (rows) of each mini-batch
    steps: list[int]  # the mini-batch of each optimizer step (rl.epochs passes, globally empty ones left out)
    # forward passes of the old log-probs' recomputation on every rank (the most any rank runs): under
    # FSDP each forward gathers the weights from all ranks, so a rank short of rows pads (no gradients)
    recompute: int = 0


def _no_closure():
    return None


class RLModule(L.LightningModule):
    """`rl` gives the update's settings (lr, weight_decay, warmup_steps, micro_batch, grad_clip,
    temperature, max_new_tokens); `identity` is what a resumed checkpoint must match; `logit_chunk`
    (trainer.logit_chunk) how many completion positions' logits exist at once (rl/logprobs.py);
    `pack_sequences` (trainer.pack_sequences) whether passes run their rows unpadded (rl/packing.py);
    `fused` (trainer.fused_optimizer, resolved) whether AdamW is torch's fused kernel."""

    def __init__(self, model, algo: RLAlgo, rl: RLConf, hooks: Hooks, identity: dict, ref_model=None,
                 logit_chunk: int = 1024, pack_sequences: bool | None = TrainerConf.pack_sequences,
                 fused: bool = False):
        super().__init__()
        self.automatic_optimization = False
        self.model = model
        # The frozen reference is not a submodule: checkpoints would hold it too (~8 GB at 4B in bf16,
        # each save) and DDP/FSDP would wrap it. on_fit_start puts it on the policy's device.
        self._frozen = {"ref": ref_model}
        self.algo, self.rl, self.hooks, self.identity = algo, rl, hooks, identity
        self.logit_chunk = logit_chunk
        self.pack_sequences = pack_sequences
        self.fused = fused
        self.batch: RolloutBatch | None = None

    @property
    def ref_model(self):
        return self.__dict__.get("_frozen", {}).get("ref")

    def configure_model(self) -> None:
        # trainer.strategy=fsdp (chorus/fsdp.py): the strategy shards the policy here, after the process
        # group exists and before the optimizer is built on the sharded parameters; other strategies
        # have no `shard`. Once only: Lightning calls this hook again on a later fit or evaluation.
        shard = getattr(self.trainer.strategy, "shard", None)
        if shard is not None and not isinstance(self.model, FSDPModule):
            shard(self.model)

    def on_fit_start(self) -> None:
        if self.ref_model is not None:
            self.ref_model.to(self.device)

    def on_train_start(self) -> None:
        if self.pack_sequences is not False:
            # The packing probe (rl/packing.py) runs the policy's forward: here every rank runs it at once
            # (under FSDP it gathers), not first where a rank happens to size or run a pass; in the
            # update's precision, which flash kernels need.
            with self.trainer.precision_plugin.forward_context():
                why_not_packable(self.model)
        # After the strategy's process group and a resume's restore: a vLLM engine built now joins the
        # group, and samples its first rollout from the weights the update starts from.
        if self.hooks.start:
            self.hooks.start(self.model)

    def on_train_batch_start(self, batch, batch_idx):
        self.model.eval()
        # No gradient memory through generation (the last update's were stepped already), and no stale
        # autocast casts of the weights the last update changed.
        self.optimizers().zero_grad(set_to_none=True)
        torch.clear_autocast_cache()
        # Hooks run outside the precision's autocast: enter it, so the fp32 policy samples (and its
        # old log-probs come) at the precision the update computes in (bf16-mixed on GPUs; nothing on CPU);
        # an inference copy's bf16 weights need no cast, its fp32 ops (softmax, norms) stay as the update's.
        # vLLM runs its own kernels in its own dtype: no autocast around it.
        hf = self.rl.engine == "hf"
        with self.trainer.precision_plugin.forward_context() if hf else contextlib.nullcontext():
            self.batch = self.hooks.rollout(self.global_step)
        self.model.train()

    def training_step(self, batch, batch_idx):
        opt, sched = self.optimizers(), self.lr_schedulers()
        t0 = time.monotonic()
        b = self.batch
        plan = self._plan(b)
        if plan.steps:
            stats = self._update(b, opt, plan)
        else:
            # No rank kept a row: there are no gradients, the optimizer skips every parameter (on
            # every rank alike), but the rollout still counts, so a run whose groups never vary ends.
            stats = {}
            opt.zero_grad(set_to_none=True)
            opt.step()
        sched.step()  # once per rollout: rl.warmup_steps counts rollouts, like rl.steps
        if self.hooks.sync_weights:
            sync_engine(opt, self.model, self.hooks.sync_weights)
        stats.update(b.stats, update_s=time.monotonic() - t0, lr=sched.get_last_lr()[0],
                     update_skipped=float(not plan.steps))
        self.log_dict({f"train/{k}": float(v) for k, v in stats.items()}, on_step=True, batch_size=1)
        if self.hooks.on_step and self.trainer.is_global_zero:
            self.hooks.on_step(self.global_step, b, stats)

    def _plan(self, b: RolloutBatch) -> "_Plan":
        """The update's schedule, the same on every rank. Under DDP each backward pass all-reduces the
        gradients, so ranks must run as many backward passes (and optimizer steps) as each other even
        when dynamic sampling or OPD's routing kept different numbers of rows on them (or none): the
        micro-batch count of each mini-batch is the max over ranks (a rank short of rows pads with
        zero-weight passes), and a mini-batch that is empty on every rank takes no optimizer step."""
        rows = b.input_ids.size(0) if b.rows else 0
        parts = minibatch_slices(rows, self.rl.mini_batches)
        # float32: every backend reduces it (MPS has no float64), and counts below 2**24 stay exact
        counts = torch.tensor(minibatch_counts(b.completion_mask[:rows], parts, self.algo.aggregation),
                              dtype=torch.float32, device=self.device)
        slices = [self._micro(b, p) for p in parts]
        # each mini-batch's passes, then the old log-probs' recomputation's (over all rows), reduced at once
        micro = torch.tensor([len(s) for s in slices] + [len(self._micro(b, slice(0, rows)))],
                             dtype=torch.float32, device=self.device)
        world = self.trainer.world_size
        if world > 1:  # every rank reaches these collectives, kept rows or not
            counts = self.trainer.strategy.reduce(counts, reduce_op="sum")
            micro = self.trainer.strategy.reduce(micro, reduce_op="max")
        normalizers = minibatch_normalizers(counts.tolist(), world)
        *micro_counts, recompute = [int(m) for m in micro]
        steps = [k for _ in range(self.rl.epochs) for k in range(len(parts)) if micro_counts[k]]
        return _Plan(parts, normalizers, micro_counts, slices, steps, recompute)

    def _micro(self, b: RolloutBatch, part: slice) -> list[slice]:
        """The rows of each forward/backward pass over `part`: rl.micro_batch rows, or rl.micro_tokens
        (the tokens each pass computes: its rows' own where it is packed, rows x longest where padded)."""
        lengths = b.attention_mask.sum(-1).tolist() if self.rl.micro_tokens else []
        return micro_slices(part, lengths, self.rl.micro_batch, self.rl.micro_tokens,
                            lambda ls: pass_tokens(self.model, ls, self.pack_sequences))

    @staticmethod
    def _rows(b: RolloutBatch, sl: slice, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """ids, attention and completion masks of rows `sl`, cut to their longest row: right padding that
        every row of the slice has is not computed."""
        width = max(1, int(b.attention_mask[sl].sum(-1).max())) if sl.stop > sl.start else 1
        return (b.input_ids[sl, :width].to(device), b.attention_mask[sl, :width].to(device),
                b.completion_mask[sl, :width].to(device))

    def _update(self, b: RolloutBatch, opt, plan: "_Plan") -> dict:
        """rl.epochs passes over the rollout, each cut into rl.mini_batches optimizer steps. Only the
        last step goes through the LightningOptimizer, which counts Lightning's global_step: the others
        go through the strategy (same precision plugin, same hooks) so that global_step, max_steps,
        save_every and resume keep counting rollouts."""
        old_gap = self._recompute_old_logprobs(b, plan.recompute)
        sums = {"loss": 0.0, "grad_norm": 0.0, "clip_frac_low": 0.0, "clip_frac_high": 0.0, "entropy": 0.0,
                "kl": 0.0, "tokens": 0.0, "padding_passes": 0.0}
        ratio_dev_max = ratio_dev_first = 0.0
        n_steps = len(plan.steps)
        for i, k in enumerate(plan.steps):
            opt.zero_grad(set_to_none=True)
            st = self._backward(b, plan.slices[k], plan.normalizers[k], plan.micro[k])
            sums["grad_norm"] += self._grad_norm()
            clip_grad_norm(self, opt, self.rl.grad_clip)
            if i == n_steps - 1:
                opt.step()
            else:
                self.trainer.strategy.optimizer_step(opt.optimizer, closure=_no_closure)
            # The weights changed inside one autocast context: an autocast with its cast cache on (Lightning
            # <= 2.5's) would give the next mini-batch the old bf16 copies, and a ratio of exactly 1.
            torch.clear_autocast_cache()
            for key in ("loss", "clip_frac_low", "clip_frac_high", "entropy", "kl", "tokens", "padding_passes"):
                sums[key] += st[key]
            ratio_dev_max = max(ratio_dev_max, st["ratio_dev_max"])
            if i == 0:
                ratio_dev_first = st["ratio_dev_max"]
        tokens = max(sums.pop("tokens"), 1.0)
        # optimizer_steps: the steps taken with gradients (the same on every rank); padding_passes:
        # this rank's zero-weight forward/backward passes that kept it in step with the others.
        return {"loss": sums["loss"] / n_steps, "grad_norm": sums["grad_norm"] / n_steps,
                **{k: sums[k] / tokens for k in ("clip_frac_low", "clip_frac_high", "entropy", "kl")},
                "ratio_dev_max": ratio_dev_max, "ratio_dev_first": ratio_dev_first, "old_logprob_gap": old_gap,
                "optimizer_steps": float(n_steps), "padding_passes": sums["padding_passes"]}

    @torch.no_grad()
    def _recompute_old_logprobs(self, b: RolloutBatch, passes: int = 0) -> float:
        """Old log-probs from the trainer's own forward pass at the sampling temperature, in the mode
        and precision of the update (so the first mini-batch's ratio is 1), never the engine's: vLLM's
        may be pre-temperature or from other kernels. Replaces b.old_logprobs; returns the mean
        |engine - trainer| gap over completion tokens (a diagnostic). `passes`: the forward passes every
        rank runs (plan.recompute); this rank pads its own up to it."""
        old = torch.zeros(b.old_logprobs.shape, dtype=torch.float32)
        slices = self._micro(b, slice(0, b.input_ids.size(0)))
        for sl in slices:
            ids, attn, mask = self._rows(b, sl, self.device)
            old[sl, :ids.size(1)] = self._forward(self.model, ids, attn, mask).logp.float().cpu()
        for _ in range(passes - len(slices)):
            self._padding_forward()
        mask = b.completion_mask.float()
        old = old * mask
        gap = float(((old - b.old_logprobs.float()).abs() * mask).sum() / mask.sum().clamp(min=1))
        b.engine_logprobs, b.old_logprobs = b.old_logprobs.float() * mask, old
        return gap

    def _padding_forward(self) -> None:
        """One forward whose result is not used: keeps a rank with fewer rows in FSDP's weight gathers.
        It takes the path a real row takes (a 2-token row's one completion token through `_forward`): the
        first such pass also runs logprobs.split's one-off check, whose forwards are collectives too."""
        ids = torch.zeros(1, 2, dtype=torch.long, device=self.device)
        self._forward(self.model, ids, torch.ones_like(ids), torch.tensor([[0, 1]], device=self.device))

    def _backward(self, b: RolloutBatch, slices: list[slice], normalizer: float, passes: int) -> dict:
        """Forward/backward of one mini-batch in its micro-batches (`slices` of the rollout's rows), then
        zero-weight passes up to `passes`, the most micro-batches any rank runs for it."""
        sums = {"loss": 0.0, "clip_frac_low": 0.0, "clip_frac_high": 0.0, "entropy": 0.0, "kl": 0.0, "tokens": 0.0,
                "ratio_dev_max": 0.0, "padding_passes": 0.0}
        done = 0
        for sl in slices:
            ids, attn, mask = self._rows(b, sl, self.device)
            fwd = self._forward(self.model, ids, attn, mask, with_entropy=True)
            loss, st = self.micro_loss(b, sl, ids, attn, mask, fwd, normalizer)
            self.manual_backward(loss)
            done += 1
            n = float(mask.sum())
            sums["loss"] += float(loss.detach())
            sums["clip_frac_low"] += st.get("clip_frac_low", 0.0) * n
            sums["clip_frac_high"] += st.get("clip_frac_high", 0.0) * n
            sums["entropy"] += float((fwd.entropy * mask).sum())
            sums["kl"] += st.get("kl_sum", 0.0)
            sums["tokens"] += n
            sums["ratio_dev_max"] = max(sums["ratio_dev_max"], st.get("ratio_dev_max", 0.0))
        for _ in range(passes - done):
            self._padding_backward()
            sums["padding_passes"] += 1
        return sums

    def _padding_backward(self) -> None:
        """One forward/backward that adds nothing: a one-token row through the policy times 0. Every
        trainable parameter (the adapter's only, under LoRA) takes part, so DDP's gradient all-reduce
        matches the other ranks' real pass; no objective runs (OPD's teachers are not called)."""
        ids = torch.zeros(1, 1, dtype=torch.long, device=self.device)
        logits = self.model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits
        self.manual_backward(logits.float().sum() * 0.0)

    def _forward(self, model, ids, attn, mask, with_entropy: bool = False) -> Forward:
        """Log-probs of the completion tokens only, at the sampling temperature (rl/logprobs.py)."""
        return forward_logprobs(model, ids, attn, mask, self.rl.temperature, self.logit_chunk, with_entropy,
                                self.pack_sequences)

    def micro_loss(self, b: RolloutBatch, sl: slice, ids, attn, mask, fwd: Forward,
                   normalizer: float) -> tuple[torch.Tensor, dict]:
        """The policy-gradient loss of one micro-batch (subclasses swap in other objectives). `ids`,
        `attn` and `mask` are the slice's tensors already on the device; `fwd` the policy's forward."""
        logp = fwd.logp
        ref = self._ref_logprobs(ids, attn, mask) if self.algo.needs_reference else None
        old = b.old_logprobs[sl, :ids.size(1)].to(self.device)
        loss, st = clipped_pg_loss(logp, old, b.advantages[sl].to(self.device), mask,
                                   self.algo.eps_low, self.algo.eps_high, self.algo.aggregation, normalizer,
                                   self.rl.max_new_tokens, ref, self.algo.kl_coef, self._tis(b, sl, mask))
        if ref is not None:
            st["kl_sum"] = float((k3_kl(logp.detach(), ref) * mask).sum())
        return loss, st

    def _tis(self, b: RolloutBatch, sl: slice, mask) -> torch.Tensor | None:
        """rl.tis_cap's per-token weights for rows `sl` when a separate sampler drew them (vLLM, or the
        inference copy in model.dtype: both give other log-probs than the trainer's forward), else None
        (HF's engine on the trained model itself: nothing to correct)."""
        if self.hooks.sync_weights is None or self.rl.tis_cap is None or b.engine_logprobs is None:
            return None
        width = mask.size(1)
        return tis_weights(b.old_logprobs[sl, :width].to(self.device), b.engine_logprobs[sl, :width].to(self.device),
                           mask, self.rl.tis_cap)

    @torch.no_grad()
    def _ref_logprobs(self, ids, attn, mask):
        if self.ref_model is not None:
            return self._forward(self.ref_model, ids, attn, mask).logp
        with self.model.disable_adapter():  # LoRA: the reference is the base model, i.e. the policy with its adapter off
            return self._forward(self.model, ids, attn, mask).logp

    def _grad_norm(self) -> float:
        grads = [p.grad.detach() for p in self.model.parameters() if p.grad is not None]
        if not grads:
            return 0.0
        # torch's get_total_norm, which clip_grad_norm_ uses, on plain and FSDP2's sharded (DTensor)
        # gradients alike: torch 2.8 (vLLM 0.11.0's) mis-reduced a stack of the shards' partial norms
        norm = torch.nn.utils.get_total_norm(grads)
        return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)

    def configure_optimizers(self):
        params = [p for p in self.model.parameters() if p.requires_grad]
        opt = adamw(params, self.rl.lr, self.rl.weight_decay, self.fused)

        def schedule(step: int) -> float:  # linear warmup, then constant (RL runs are short and open-ended)
            return min(1.0, (step + 1) / max(1, self.rl.warmup_steps))

        return {"optimizer": opt, "lr_scheduler": {"scheduler": torch.optim.lr_scheduler.LambdaLR(opt, schedule)}}

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["chorus"] = {"identity": self.identity, "data": self.hooks.state() if self.hooks.state else {},
                                "torch_rng": torch.get_rng_state()}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        # checkpoints made while the reference was a submodule hold its weights: not the policy's state
        state = checkpoint.get("state_dict", {})
        for key in [k for k in state if k.startswith("ref_model.")]:
            del state[key]
        saved = checkpoint.get("chorus", {})
        if saved.get("identity") != self.identity:
            raise ValueError(f"the checkpoint was trained from {saved.get('identity')}, this run uses "
                             f"{self.identity}; resume with the same model (sft_stage, model, rl.lora) or set "
                             f"rl.resume=false to start over")
        if self.hooks.restore:
            self.hooks.restore(saved["data"])
        torch.set_rng_state(saved["torch_rng"])
