"""Rank helpers: who am I in a distributed run, and should I be the one writing files?

MMEngine's ``mmengine/dist/utils.py`` answers these questions for every backend and for process
groups. minimm keeps the five questions everybody asks and answers them from
``torch.distributed`` only when it is both *available* (compiled in) and *initialised*
(``init_process_group`` ran); in any other case the process is rank 0 of a world of size 1.
Left out compared with MMEngine: process groups other than the default one, ``get_local_rank``,
launchers and device helpers.
"""
import functools
import sys
from typing import Callable, Tuple

import torch.distributed as torch_dist


def is_distributed() -> bool:
    """True when the default process group exists."""
    return torch_dist.is_available() and torch_dist.is_initialized()


def get_rank() -> int:
    """Rank of this process in the default group; 0 when not distributed."""
    return torch_dist.get_rank() if is_distributed() else 0


def get_world_size() -> int:
    """Number of processes in the default group; 1 when not distributed."""
    return torch_dist.get_world_size() if is_distributed() else 1


def get_dist_info() -> Tuple[int, int]:
    """``(rank, world_size)`` in one call, as MMEngine's ``get_dist_info``."""
    return get_rank(), get_world_size()


def is_main_process() -> bool:
    """True on rank 0, the process that writes logs and checkpoints."""
    return get_rank() == 0


def master_only(func: Callable) -> Callable:
    """Decorator: run ``func`` on rank 0 only; the other ranks get ``None`` back."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if is_main_process():
            return func(*args, **kwargs)
        return None

    return wrapper


def barrier() -> None:
    """Wait for all ranks; a no-op when not distributed."""
    if is_distributed():
        torch_dist.barrier()


def is_dtensor(value) -> bool:
    """Whether ``value`` is a DTensor (a sharded model's parameter: each rank holds its own piece).
    DTensor's package is asked only once something loaded it: before that, no tensor is one."""
    module = sys.modules.get('torch.distributed.tensor')
    return module is not None and isinstance(value, module.DTensor)
