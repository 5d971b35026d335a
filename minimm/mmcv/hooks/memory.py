"""EmptyCacheHook: hand the GPU memory PyTorch caches back to the driver, at the chosen points.

Useful when other processes share the GPU, or to see the real peak in ``nvidia-smi``. The points
are the generic methods, so "after each epoch" means after train and after val epochs. Without
CUDA, ``torch.cuda.empty_cache`` does nothing.
"""
import torch

from .hook import HOOKS, Hook


@HOOKS.register_module()
class EmptyCacheHook(Hook):
    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {'*': ''}  # frees cached device memory: no value changes

    def __init__(self, before_epoch=False, after_epoch=True, after_iter=False):
        self._before_epoch, self._after_epoch = before_epoch, after_epoch
        self._after_iter = after_iter

    def before_epoch(self, runner):
        if self._before_epoch:
            torch.cuda.empty_cache()

    def after_epoch(self, runner):
        if self._after_epoch:
            torch.cuda.empty_cache()

    def after_iter(self, runner):
        if self._after_iter:
            torch.cuda.empty_cache()
