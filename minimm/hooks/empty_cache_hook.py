"""EmptyCacheHook: give the CUDA caching allocator's unused blocks back to the driver.

PyTorch keeps freed GPU memory in a cache for reuse; ``torch.cuda.empty_cache()`` releases it, so
that other processes (or a memory reading such as ``nvidia-smi``) see it free. It does not make
more memory available to this process, and calling it often costs time — hence the default:
only after each epoch (train, val and test alike). As in MMEngine, the hook asks
``torch.cuda.is_available()`` first, so on a machine without CUDA it empties nothing.
Left out: the MUSA device.
"""
from typing import Optional, Sequence, Union

import torch

from ..registry import HOOKS
from .hook import DATA_BATCH, Hook


@HOOKS.register_module()
class EmptyCacheHook(Hook):
    """Call ``torch.cuda.empty_cache()`` before epochs, after epochs and/or after iterations.

    Args:
        before_epoch: empty the cache before every train/val/test epoch.
        after_epoch: after every train/val/test epoch.
        after_iter: after every train/val/test iteration.
    """

    priority = 'NORMAL'
    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {'*': ''}  # frees cached device memory: no value changes

    def __init__(self, before_epoch: bool = False, after_epoch: bool = True,
                 after_iter: bool = False) -> None:
        self._do_before_epoch = before_epoch
        self._do_after_epoch = after_epoch
        self._do_after_iter = after_iter

    @staticmethod
    def _empty_cache() -> None:
        # MMEngine asks is_cuda_available() first too: without CUDA, nothing is emptied.
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def _before_epoch(self, runner, mode: str = 'train') -> None:
        if self._do_before_epoch:
            self._empty_cache()

    def _after_epoch(self, runner, mode: str = 'train') -> None:
        if self._do_after_epoch:
            self._empty_cache()

    def _after_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None,
                    outputs: Optional[Union[Sequence, dict]] = None, mode: str = 'train') -> None:
        if self._do_after_iter:
            self._empty_cache()
