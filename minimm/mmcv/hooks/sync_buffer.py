"""SyncBuffersHook: average the buffers (BatchNorm statistics) across ranks after every train
**and** val epoch (generic ``after_epoch``), as MMCV 1.7's. Different: integer buffers
(``num_batches_tracked``) are averaged with rounding, where MMCV fails on current torch."""
from minimm.dist import all_reduce_params

from .hook import HOOKS, Hook


@HOOKS.register_module()
class SyncBuffersHook(Hook):

    def __init__(self, distributed: bool = True):
        self.distributed = distributed

    def after_epoch(self, runner) -> None:
        if self.distributed:
            all_reduce_params(runner.model.buffers(), op='mean')
