"""MMFullyShardedDataParallel: a model sharded over the processes (torch's FSDP2) that speaks the
Runner's step protocol.

DDP keeps a whole copy of the weights, gradients and optimizer state on every rank. Fully sharded
data parallel (FSDP, ZeRO-3) keeps on each rank only its *shard*: with N ranks, about 1/N of every
parameter. Before a module's forward the ranks all-gather its whole weights, use them, and free
them again; in backward each gradient is reduce-scattered, so each rank receives the averaged
gradient of its own shard and the optimizer steps on the shard alone. Every rank computes what a
DDP rank computes, with a 1/N share of the memory.

torch's FSDP2 does the work: ``fully_shard(module)`` turns each parameter into a DTensor holding
this rank's rows (placement ``Shard(0)``) and hooks the module's forward. This class calls it
(on the submodules ``auto_wrap_policy`` picks, then on the whole model) and adds the loops' steps:
``train_step`` sets whether this step's backward reduces the gradients (not on a gradient
accumulation step) and runs the model's own ``train_step``: its forward, called as
``self(...)``, is FSDP2's forward, so nothing of ``BaseModel.train_step`` needs repeating.
``val_step`` and ``test_step`` are the model's, likewise, followed by :meth:`reshard`, so that
between steps the parameters are always the shards. ``.module`` is the sharded model, so
``unwrap_model`` and ``is_model_wrapper`` work as for DDP.

MMEngine's keys are FSDP1's; :mod:`minimm.model.fsdp_options` reads them. One process that is not
distributed never builds this class: the Runner trains the model unwrapped there, for DDP and FSDP
alike; a distributed run of one process shards over a one-rank mesh.

Different from MMEngine: built on FSDP2, not FSDP1 (no flat parameters; ``state_dict()`` holds
DTensors); ``param_init_fn`` and the hybrid strategies are refused (fsdp_options.py says what to
write instead).
"""
from typing import Dict, Union

import torch
import torch.distributed as torch_dist
from torch import nn

from ..dist import broadcast
from ..dist.utils import is_dtensor
from ..registry import MODEL_WRAPPERS
from .fsdp_options import fully_shard_arguments, modules_to_shard, wrap_policy


def _device(module: nn.Module, device_id) -> torch.device:
    """The device to shard on: ``device_id`` (a CUDA index or a device), else the model's."""
    if device_id is not None:
        return torch.device('cuda', device_id) if isinstance(device_id, int) \
            else torch.device(device_id)
    first = next(module.parameters(), None)
    return first.device if first is not None else torch.device('cpu')


def _mesh(device_type: str, process_group):
    """The 1-D mesh of the ranks to shard over: all of them, or ``process_group``'s."""
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    if process_group is not None:
        return DeviceMesh.from_group(process_group, device_type)
    return init_device_mesh(device_type, (torch_dist.get_world_size(), ))


def broadcast_whole_tensors(tensors) -> None:
    """Broadcast rank 0's value of each tensor every rank holds whole; a DTensor (a sharded
    parameter) holds each rank's own rows and is left alone."""
    for tensor in tensors:
        if not is_dtensor(tensor):
            broadcast(tensor)


@MODEL_WRAPPERS.register_module()
class MMFullyShardedDataParallel(nn.Module):
    """Shard ``module``'s parameters over the ranks with FSDP2's ``fully_shard``.

    Args:
        module: the model (a ``BaseModel``).
        process_group: the ranks to shard over (default: all).
        sharding_strategy, cpu_offload, auto_wrap_policy, backward_prefetch, mixed_precision,
            param_init_fn, use_orig_params: MMEngine's (FSDP1's) keys, read by
            :mod:`minimm.model.fsdp_options`.
        **kwargs: FSDP1's ``device_id``, ``sync_module_states``, ``ignored_modules``,
            ``limit_all_gathers``, ``forward_prefetch``; FSDP2's ``reshard_after_forward``.
    """

    def __init__(self, module: nn.Module, process_group=None, sharding_strategy=None,
                 cpu_offload=None, auto_wrap_policy=None, backward_prefetch=None,
                 mixed_precision=None, param_init_fn=None, use_orig_params: bool = True,
                 **kwargs):
        super().__init__()
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        shard_args, own = fully_shard_arguments(
            sharding_strategy=sharding_strategy, cpu_offload=cpu_offload,
            mixed_precision=mixed_precision, backward_prefetch=backward_prefetch,
            use_orig_params=use_orig_params, param_init_fn=param_init_fn, **kwargs)
        policy = wrap_policy(auto_wrap_policy)  # a bad policy fails before anything is sharded
        device = _device(module, own.get('device_id'))
        module = module.to(device)
        if own.get('sync_module_states'):  # every rank starts from rank 0's weights
            for tensor in list(module.parameters()) + list(module.buffers()):
                torch_dist.broadcast(tensor.detach(), src=0, group=process_group)
        ignored = {p for m in own.get('ignored_modules') or () for p in m.parameters()}
        mesh = _mesh(device.type, process_group)
        # Innermost first: each picked submodule gathers its own weights, the root the rest.
        # Layers kept in their own dtype under mixed precision (BatchNorm) come first, alone.
        own_dtype = [m for m in module.modules() if isinstance(m, own['full_precision'])]
        picked = [m for m in modules_to_shard(module, policy) if m not in own_dtype]
        for submodule in own_dtype + picked + [module]:
            args = shard_args
            if submodule in own_dtype:
                args = dict(shard_args, mp_policy=MixedPrecisionPolicy(
                    reduce_dtype=shard_args['mp_policy'].reduce_dtype))
            fully_shard(submodule, mesh=mesh, ignored_params=ignored or None, **args)
        self.module = module

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def train_step(self, data: Union[dict, tuple, list], optim_wrapper) -> Dict[str, torch.Tensor]:
        """The model's ``train_step``; its backward reduces the gradients unless this is a
        gradient-accumulation step (FSDP2 reads the flag during backward)."""
        self.module.set_requires_gradient_sync(optim_wrapper.should_sync())
        return self.module.train_step(data, optim_wrapper)

    def val_step(self, data: Union[dict, tuple, list]) -> list:
        outputs = self.module.val_step(data)
        self.reshard()
        return outputs

    def test_step(self, data: Union[dict, tuple, list]) -> list:
        outputs = self.module.test_step(data)
        self.reshard()
        return outputs

    def reshard(self) -> None:
        """Free the gathered weights and register the shards again. FSDP2 keeps the root
        module's gathered weights after forward (for the backward that usually follows): after
        an evaluation step none follows, and between steps the model's parameters must be its
        shards, which hooks read and the EMA swaps in place."""
        from torch.distributed.fsdp import FSDPModule
        for module in self.module.modules():
            if isinstance(module, FSDPModule):
                module.reshard()
