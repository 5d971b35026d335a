"""MMDistributedDataParallel for MMCV 1.x models (``mmcv/parallel/distributed.py``): DDP whose
``train_step`` is the module's.

DistributedDataParallel averages gradients through hooks that its own ``forward`` sets up; a
``train_step`` that simply called ``self.module.train_step`` would skip that, and every rank would
step on its own gradients. MMCV 1.7 copied DDP's forward bookkeeping into ``train_step``; minimm
instead runs the module's ``train_step`` *as* DDP's forward: the module's ``forward`` is replaced,
for one call, by a function that restores it and then calls ``train_step`` (which calls the real
``forward`` inside). The constructor (and its buffer-broadcast option) is the MMEngine-side
wrapper's, shared.
"""
from minimm.model.wrappers import MMDistributedDataParallel as _DDPWrapper

from .registry import MODULE_WRAPPERS


@MODULE_WRAPPERS.register_module()
class MMDistributedDataParallel(_DDPWrapper):
    """DDP around a model with MMCV's ``train_step(data_batch, optimizer)``/``val_step``."""

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
