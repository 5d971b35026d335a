"""SyncBuffersHook, as MMCV 1.7's: average the buffers (BatchNorm statistics) across ranks after
every train **and** val epoch (generic ``after_epoch``). Different: integer buffers
(``num_batches_tracked``) are averaged with rounding, where MMCV fails on current torch
(``dist_utils.allreduce_params``)."""
from ..dist_utils import allreduce_params
from .hook import HOOKS, Hook


@HOOKS.register_module()
class SyncBuffersHook(Hook):
    """``distributed``: whether to synchronise at all (only useful in distributed training)."""

    def __init__(self, distributed: bool = True):
        self.distributed = distributed

    def after_epoch(self, runner):
        """All-reduce model buffers at the end of each epoch."""
        if self.distributed:
            allreduce_params(runner.model.buffers())
