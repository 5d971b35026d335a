"""SyncBuffersHook: average the model's buffers (BatchNorm statistics) across ranks after every
epoch, train **and** val (it overrides the generic ``after_epoch``), as MMCV 1.7's.

Different from MMCV: integer buffers (``num_batches_tracked``) are averaged with rounding instead
of failing on modern torch.
"""
from minimm.dist import all_reduce_params

from .hook import HOOKS, Hook


@HOOKS.register_module()
class SyncBuffersHook(Hook):

    def __init__(self, distributed: bool = True):
        self.distributed = distributed

    def after_epoch(self, runner) -> None:
        if self.distributed:
            all_reduce_params(runner.model.buffers(), op='mean')
