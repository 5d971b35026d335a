"""Gathering per-rank results for evaluation: every rank's list, back in dataset order, on rank 0.

During distributed validation each rank predicts on its share of the dataset. ``DefaultSampler``
deals the (possibly shuffled-then-padded) indices round-robin: rank r gets positions r,
r + world_size, r + 2·world_size... :func:`collect_results` undoes that by interleaving the ranks'
lists (rank 0's first, rank 1's first, ..., rank 0's second...) and cuts the padding off at
``size``, which is the order MMEngine's ``collect_results`` restores.

Results travel as pickled Python objects through ``torch.distributed.all_gather_object`` (over
the backend's device: CUDA for NCCL), whichever ``device`` is asked for. Left out compared with
MMEngine: the shared-``tmpdir`` route.
"""
from itertools import chain, zip_longest
from typing import Any, List, Optional

import torch.distributed as torch_dist

from .utils import get_world_size, is_main_process


def collect_results(results: list, size: int, device: str = 'cpu',
                    tmpdir: Optional[str] = None) -> Optional[list]:
    """All ranks' ``results`` on rank 0, interleaved by rank and cut to ``size``; None elsewhere.

    Not distributed (or one process): ``results[:size]``. ``device`` ('cpu' or 'gpu') and
    ``tmpdir`` (None only) are MMEngine's arguments.
    """
    if device not in ('cpu', 'gpu'):
        raise ValueError(f"device must be 'cpu' or 'gpu', but got {device!r}")
    if tmpdir is not None:
        raise ValueError('collect_results: collecting through a shared tmpdir is not supported '
                         'by minimm; leave tmpdir=None')
    if get_world_size() == 1:
        return results[:size]
    parts: List[Any] = [None] * get_world_size()
    torch_dist.all_gather_object(parts, results)
    if not is_main_process():
        return None
    missing = object()  # zip_longest fill value that can never be a real result
    ordered = [r for r in chain.from_iterable(zip_longest(*parts, fillvalue=missing))
               if r is not missing]
    return ordered[:size]
