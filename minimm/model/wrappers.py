"""MMDistributedDataParallel: DistributedDataParallel that speaks the Runner's step protocol.

The loops call ``model.train_step(data, optim_wrapper)``, ``val_step`` and ``test_step``; plain
``DistributedDataParallel`` only has ``forward``. Gradients are averaged across ranks by hooks
that DDP installs during **its own forward**: a ``train_step`` that called
``self.module.train_step`` would bypass that forward, and each rank would step on its own
gradients — the ranks would silently drift apart. So ``train_step`` here repeats
``BaseModel.train_step`` but runs the loss forward through ``self(...)`` (the DDP forward).
Validation and testing need no gradient synchronisation and simply delegate to the module.

:func:`is_model_wrapper` says whether a model is one of the wrappers in ``MODEL_WRAPPERS`` or its
children (torch's ``DistributedDataParallel`` and ``DataParallel``, this class, a package's own),
which hooks ask before reaching for ``model.module``, as in MMEngine.

Left out compared with MMEngine: ``detect_anomalous_params``, the DeepSpeed wrapper and
``MMSeparateDistributedDataParallel``. FSDP's ``MMFullyShardedDataParallel`` is in
``fully_sharded.py`` (on torch's FSDP2).
"""
from typing import Dict, Optional, Sequence, Union

import torch
import torch.nn as nn
from torch.nn.parallel import DataParallel, DistributedDataParallel

from ..dist.ddp import buffer_broadcast_option
from ..registry import MODEL_WRAPPERS, Registry
from ..registry.lookup import walk
from .base_model import BaseModel

MODEL_WRAPPERS.register_module(module=DistributedDataParallel)
MODEL_WRAPPERS.register_module(module=DataParallel)


def is_model_wrapper(model: nn.Module, registry: Registry = MODEL_WRAPPERS) -> bool:
    """Whether ``model`` is an instance of a class registered in ``registry`` or in a registry
    below it (a downstream package's child ``MODEL_WRAPPERS``), as in MMEngine."""
    return any(isinstance(model, tuple(node.module_dict.values())) for node in walk(registry))


@MODEL_WRAPPERS.register_module()
class MMDistributedDataParallel(DistributedDataParallel):
    """DDP around a ``BaseModel``; ``train_step`` synchronises gradients.

    Args:
        module: the model (a ``BaseModel``) already on its device.
        device_ids: ``[local GPU index]`` for a CUDA model, None for a CPU model.
        broadcast_buffers: re-broadcast rank 0's buffers before every forward (DDP's default is
            True; MMEngine's Runner passes False and leaves buffers to ``SyncBuffersHook``).
        **kwargs: passed to ``DistributedDataParallel``.
    """

    def __init__(self, module: torch.nn.Module, device_ids: Optional[Sequence[int]] = None,
                 broadcast_buffers: bool = False, **kwargs):
        super().__init__(module, device_ids=device_ids,
                         **buffer_broadcast_option(broadcast_buffers), **kwargs)

    def train_step(self, data: Union[dict, tuple, list], optim_wrapper) -> Dict[str, torch.Tensor]:
        """``BaseModel.train_step`` with the loss forward run through DDP."""
        # optim_context(self) uses DDP's no_sync() on gradient-accumulation steps.
        with optim_wrapper.optim_context(self):
            data = self.module.data_preprocessor(data, True)
            losses = self._run_forward(data, mode='loss')
        parsed_losses, log_vars = self.module.parse_losses(losses)
        optim_wrapper.update_params(parsed_losses)
        return log_vars

    def val_step(self, data: Union[dict, tuple, list]) -> list:
        return self.module.val_step(data)

    def test_step(self, data: Union[dict, tuple, list]) -> list:
        return self.module.test_step(data)

    # The same dispatch as BaseModel's (dict -> keyword arguments, list -> positional); its
    # ``self(...)`` is the DDP forward here, which is the point.
    _run_forward = BaseModel._run_forward
