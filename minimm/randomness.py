"""Randomness: one seed for every random number generator a training run touches.

A PyTorch training run draws random numbers from four independent generators: Python's ``random``,
NumPy's global ``np.random``, torch's CPU generator and one generator per CUDA device. Seeding only
one of them is the classic reason two "identical" runs diverge. :func:`set_random_seed` seeds them
all from one number, as MMEngine's ``mmengine.runner.set_random_seed`` does, and
:func:`sync_random_seed` (``minimm.dist``, as in MMEngine; also importable from here) makes every
rank agree on that number when no seed was given.

Left out compared with MMEngine: NPU/MLU/MUSA devices, process groups other than the default one,
and the warning printed when ``cudnn.benchmark`` is switched off by ``deterministic=True``.
"""
import random
from typing import Optional

import numpy as np
import torch

from minimm.dist import get_rank, sync_random_seed

__all__ = ['set_random_seed', 'sync_random_seed']


def set_random_seed(seed: Optional[int] = None, deterministic: bool = False,
                    diff_rank_seed: bool = False) -> int:
    """Seed ``random``, ``np.random``, torch and all CUDA devices; return the seed used.

    Args:
        seed: the seed; ``None`` draws one with :func:`sync_random_seed` (same on every rank).
        deterministic: also make cuDNN pick deterministic kernels and ask torch to raise on
            operations that have no deterministic implementation. Slower, but bit-reproducible.
        diff_rank_seed: add the rank to the seed, so each rank draws different augmentations.
    """
    if seed is None:
        seed = sync_random_seed()
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f'seed must be an int or None, but got {type(seed).__name__} {seed!r}')
    if diff_rank_seed:
        seed += get_rank()
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    if deterministic:
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        torch.use_deterministic_algorithms(True)
    return seed
