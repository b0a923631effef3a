"""trainer.strategy=fsdp: torch's FSDP2 (`fully_shard`) through Lightning's ModelParallelStrategy.

Why FSDP2 and not Lightning's FSDPStrategy (FSDP1): RL's update runs several forward/backward passes
per optimizer step and clips by the norm over all gradients through `LightningModule.clip_gradients`;
Lightning's FSDP1 precision plugin refuses clipping by norm, and FSDP1's flat parameters need the
root module's own clip and state-dict calls. FSDP2 shards each parameter as a DTensor: the plain
`clip_grad_norm_`, `get_model_state_dict` and any number of passes per step work on it.

Each decoder layer (the classes a transformers model lists in `_no_split_modules`) is one unit whose
weights are gathered for its forward and backward, then the root holds the rest (embeddings, final
norm, head). Every forward and backward is a collective, so ranks must run as many of each as each
other (RLModule pads with zero-weight passes)."""
from __future__ import annotations

import types
from typing import Callable

import torch
from lightning.pytorch.strategies import ModelParallelStrategy
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.fsdp import (CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy, fully_shard,
                                    register_fsdp_forward_method)

# The sharded model's method that runs its body (the decoder without the output head) as a forward of
# the root unit: rl/logprobs.py's lean path calls body and head apart, and a bare body call would
# skip the root's gathering of its own weights (embeddings, final norm; the head when tied).
BODY_METHOD = "chorus_body"


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's repeated blocks, each its own FSDP unit: the modules whose class the model (a
    transformers model, or a peft model around one) names in `_no_split_modules`."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if not layers:
        raise ValueError(f"trainer.strategy=fsdp: {type(model).__name__} names no decoder layer class "
                         "(_no_split_modules); use trainer.strategy=ddp for it")
    return layers


def mixed_precision(precision: str) -> MixedPrecisionPolicy:
    """FSDP2's policy for trainer.precision: under bf16-mixed (16-mixed) each unit's weights are gathered
    in bf16 (fp16) for its compute, half the all-gather traffic and memory of fp32, and gradients are
    reduce-scattered in fp32 into the fp32 master shards, so AdamW's small steps are not rounded away
    (verl's and torchtitan's setting); otherwise nothing is cast."""
    half = {"bf16-mixed": torch.bfloat16, "bf16": torch.bfloat16, "16-mixed": torch.float16, "16": torch.float16}
    dtype = half.get(str(precision))
    return MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32) if dtype else MixedPrecisionPolicy()


def shard_model(model: torch.nn.Module, mesh, cpu_offload: bool = False,
                mp_policy: MixedPrecisionPolicy | None = None) -> torch.nn.Module:
    """FSDP2 over `mesh` (a 1-D device mesh): each decoder layer, then the root. `cpu_offload` keeps
    the parameter shards, gradients and so AdamW's states in CPU memory, moving each unit to the
    device only for its compute; `mp_policy` (mixed_precision) the dtypes units gather and reduce in."""
    # pinned host memory speeds the copies to a GPU; there is none to pin for when the mesh is the CPU's
    policy = CPUOffloadPolicy(pin_memory=mesh.device_type != "cpu") if cpu_offload else OffloadPolicy()
    mp = mp_policy or MixedPrecisionPolicy()
    for layer in decoder_layers(model):
        fully_shard(layer, mesh=mesh, offload_policy=policy, mp_policy=mp)
    # The root keeps its weights gathered from its forward to its backward (FSDP2's default for the
    # root, said here because the lean path relies on it): the head runs after the body's forward.
    fully_shard(model, mesh=mesh, offload_policy=policy, mp_policy=mp, reshard_after_forward=False)
    # Gradients are reduce-scattered as a SUM, then divided by FSDP itself, on every backend: gloo in
    # torch 2.8 (vLLM 0.11.0's) sums under ReduceOp.AVG, so the averaged gradients came out world-size
    # times too large; one path for every device, the one the CPU suite runs
    for unit in model.modules():
        if isinstance(unit, FSDPModule):
            unit.set_force_sum_reduction_for_comms(True)
    setattr(model, BODY_METHOD, types.MethodType(_body, model))
    register_fsdp_forward_method(model, BODY_METHOD)
    return model


def _body(model, **inputs):
    """The decoder's output (last_hidden_state), bound to the sharded model as BODY_METHOD."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft wraps the HF model
    return base.get_decoder()(**inputs)


def unsharded(model: torch.nn.Module, rebuild: Callable[[], torch.nn.Module]) -> torch.nn.Module | None:
    """After training: the policy as a plain model on rank 0 (`rebuild()` makes one of its architecture,
    then takes the full weights gathered from every rank's shards into CPU memory), None on the other
    ranks; every rank must call it (the gather is a collective). A model that is not sharded is
    returned as it is, on every rank. Exports and evaluations read the plain copy: the sharded module
    would wait in a gather for ranks that have left."""
    if not isinstance(model, FSDPModule):
        return model
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if torch.distributed.get_rank() != 0:
        return None
    plain = rebuild()
    plain.load_state_dict(full)
    return plain


class FSDP2Strategy(ModelParallelStrategy):
    """Lightning's ModelParallelStrategy as pure FSDP: one data-parallel dimension over every rank (no
    tensor parallelism), checkpoints gathered into one file on rank 0 (the format a resume and
    `_checkpoint_step` read, as under ddp). The module calls `shard(model)` from its configure_model."""

    def __init__(self, cpu_offload: bool = False, precision: str = "32-true"):
        super().__init__(tensor_parallel_size=1, save_distributed_checkpoint=False)
        self.cpu_offload = cpu_offload
        self.mp_policy = mixed_precision(precision)

    def setup_environment(self) -> None:
        # every process of every node shards the model: the data-parallel size is the world size
        self._data_parallel_size = self.num_nodes * self.num_processes
        super().setup_environment()

    def shard(self, model: torch.nn.Module) -> torch.nn.Module:
        return shard_model(model, self.device_mesh["data_parallel"], self.cpu_offload, self.mp_policy)
