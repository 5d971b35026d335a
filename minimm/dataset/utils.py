"""Collate functions and the DataLoader worker seeding.

A DataLoader reads ``batch_size`` samples and hands the list to ``collate_fn`` to make one batch.
MMEngine ships two, both registered in ``FUNCTIONS`` so a config can name them
(``collate_fn=dict(type='default_collate')``):

* :func:`pseudo_collate` (the Runner's default) *transposes* without stacking: a list of
  ``dict(inputs=x, data_samples=y)`` becomes ``dict(inputs=[x1, x2, ...], data_samples=[y1, ...])``.
  Samples of different sizes survive; the model's data preprocessor stacks them later.
* :func:`default_collate` transposes the same way but lets torch's ``default_collate`` stack the
  leaves, so tensors of equal shape become one batched tensor.

:func:`worker_init_fn` gives every DataLoader worker of every rank its own, reproducible seed.

Left out compared with MMEngine: ``BaseDataElement`` leaves (minimm has no data elements) and
``disable_subprocess_warning``.
"""
import random
from collections.abc import Mapping, Sequence
from typing import Any, Callable, List

import numpy as np
import torch
from torch.utils.data import default_collate as torch_default_collate

from minimm.randomness import sync_random_seed
from minimm.registry import FUNCTIONS

__all__ = ['pseudo_collate', 'default_collate', 'worker_init_fn', 'sync_random_seed']


def _transpose(data_batch: List[Any], collate: Callable, collate_leaves: Callable) -> Any:
    """Turn a list of samples into one structure of lists, recursing with ``collate``.

    Both collate functions share this walk; they differ only in what happens to a leaf
    (``collate_leaves`` receives the leaves: a list, or a tuple when they came out of a transposed
    sequence). Strings stay as they are, as in MMEngine.
    """
    if not isinstance(data_batch, Sequence) or len(data_batch) == 0:
        raise ValueError(f'collate expects a non-empty list of samples, but got {data_batch!r}')
    item = data_batch[0]
    if isinstance(item, (str, bytes)):
        return data_batch
    if isinstance(item, tuple) and hasattr(item, '_fields'):  # a namedtuple keeps its type
        return type(item)(*(collate(samples) for samples in zip(*data_batch)))
    if isinstance(item, Sequence):
        size = len(item)
        if any(len(sample) != size for sample in data_batch):
            raise RuntimeError('each element in list of batch should be of equal size')
        transposed = [collate(samples) for samples in zip(*data_batch)]
        if isinstance(item, tuple):  # torch's convention: a batch of tuples becomes a list
            return transposed
        try:
            return type(item)(transposed)
        except TypeError:  # sequence types without a constructor from an iterable (range)
            return transposed
    if isinstance(item, Mapping):
        return type(item)({key: collate([sample[key] for sample in data_batch]) for key in item})
    return collate_leaves(data_batch)


@FUNCTIONS.register_module()
def pseudo_collate(data_batch: List[Any]) -> Any:
    """Transpose a list of samples into the samples' structure, with lists at the leaves."""
    return _transpose(data_batch, pseudo_collate, lambda leaves: leaves)


@FUNCTIONS.register_module()
def default_collate(data_batch: List[Any]) -> Any:
    """Transpose like :func:`pseudo_collate`, then stack each list of leaves with torch."""
    return _transpose(data_batch, default_collate, torch_default_collate)


def worker_init_fn(worker_id: int, num_workers: int, rank: int, seed: int) -> None:
    """Seed one DataLoader worker: ``num_workers * rank + worker_id + seed``.

    Every (rank, worker) pair gets a distinct seed, so random augmentations differ across workers
    yet repeat exactly when the run is repeated with the same seed.
    """
    worker_seed = num_workers * rank + worker_id + seed
    np.random.seed(worker_seed)
    random.seed(worker_seed)
    torch.manual_seed(worker_seed)
