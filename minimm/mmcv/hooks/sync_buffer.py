"""SyncBuffersHook: make every rank's buffers (BatchNorm running statistics) the same.

Gradients are averaged across ranks, but buffers are not: each rank's BatchNorm tracks the
statistics of its own share of the data. At the end of each epoch (train and val, through the
generic ``after_epoch``) this hook replaces them by their average over the ranks. Different from
MMCV 1.7: integer buffers (``num_batches_tracked``) are averaged with rounding, where MMCV's
in-place division fails on current PyTorch (see ``dist_utils.allreduce_params``).
"""
from ..dist_utils import allreduce_params
from .hook import HOOKS, Hook


@HOOKS.register_module()
class SyncBuffersHook(Hook):
    """``distributed=False`` turns the hook off (one process has nothing to synchronise)."""

    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {'after_train_epoch after_val_epoch': 'model.buffers -> model.buffers'}

    def __init__(self, distributed: bool = True):
        self.distributed = distributed

    def after_epoch(self, runner):
        if self.distributed:
            allreduce_params(runner.model.buffers())
