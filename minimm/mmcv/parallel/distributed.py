"""MMDistributedDataParallel for MMCV 1.x models (``mmcv/parallel/distributed.py``): DDP whose
``train_step`` is the module's.

DistributedDataParallel averages gradients through hooks that its own ``forward`` sets up; a
``train_step`` that simply called ``self.module.train_step`` would skip that, and every rank would
step on its own gradients. MMCV 1.7 copied DDP's forward bookkeeping into ``train_step``; minimm
instead runs the module's ``train_step`` *as* DDP's forward: the module's ``forward`` is replaced,
for one call, by a function that restores it and then calls ``train_step`` (which calls the real
``forward`` inside). Buffers are not re-broadcast before each forward unless asked
(``broadcast_buffers=True``), as MMEngine's wrapper does; the keyword's spelling for the installed
torch comes from the floor both worlds share (``minimm/dist/ddp.py``).
"""
from typing import Optional, Sequence

import torch
from torch.nn.parallel import DistributedDataParallel

from minimm.dist.ddp import buffer_broadcast_option

from .registry import MODULE_WRAPPERS


@MODULE_WRAPPERS.register_module()
class MMDistributedDataParallel(DistributedDataParallel):
    """DDP around a model with MMCV's ``train_step(data_batch, optimizer)``/``val_step``."""

    def __init__(self, module: torch.nn.Module, device_ids: Optional[Sequence[int]] = None,
                 broadcast_buffers: bool = False, **kwargs):
        super().__init__(module, device_ids=device_ids,
                         **buffer_broadcast_option(broadcast_buffers), **kwargs)

    def _through_ddp_forward(self, step, *args, **kwargs):
        module = self.module

        def run_step(*step_args, **step_kwargs):
            del module.forward  # the class's forward again, for the step's own forward calls
            return step(*step_args, **step_kwargs)

        module.forward = run_step
        try:
            return self(*args, **kwargs)
        finally:
            module.__dict__.pop('forward', None)

    def train_step(self, data_batch, optimizer=None, **kwargs) -> dict:
        return self._through_ddp_forward(self.module.train_step, data_batch, optimizer, **kwargs)

    def val_step(self, data_batch, optimizer=None, **kwargs) -> dict:
        return self.module.val_step(data_batch, optimizer, **kwargs)
