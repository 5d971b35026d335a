"""Collectives: the few cross-rank operations a training engine needs, safe to call anywhere.

Every function here works in place, and does nothing when the run is not distributed (or has one
process), so hooks and metrics call them unconditionally. Each moves the data to the device the
backend communicates on (CUDA for NCCL, CPU for gloo) and back, as MMEngine's do, and stages a
tensor of another layout (a transposed or channels_last weight) through a contiguous copy, which
the backends need.

* :func:`broadcast` — rank ``src``'s tensor to everyone (initial weights, the shared timestamp).
* :func:`all_reduce` — sum or mean of one tensor over the ranks.
* :func:`all_reduce_params` — the same for many tensors (a model's buffers) with **one all-reduce
  per dtype**: :func:`minimm.ops.pack` gathers each dtype's tensors into one flat tensor, the flat
  tensor is all-reduced, and :func:`minimm.ops.unpack_` scatters it back with the ``1/world_size``
  of a mean fused into the copy. A tensor listed twice (tied weights) is reduced once.

**Integer tensors and 'mean'** (BatchNorm's ``num_batches_tracked``): the sum is computed exactly
in integer arithmetic, then divided by the world size **rounding to the nearest integer, halves
upward** (``(sum + world_size // 2) // world_size``), still in integers. When all ranks hold the
same count — the normal case under DDP — the result is that count exactly. MMEngine instead
divides in floating point and truncates toward zero when copying back (counts 1 and 4 give 2;
here 3), and MMCV's in-place ``div_`` raises on modern torch. Bool tensors cannot be averaged.

* :func:`all_gather` / :func:`gather` — every rank's tensor, as a list in rank order, on every
  rank or on ``dst``; :func:`all_gather_object`, :func:`gather_object`,
  :func:`broadcast_object_list`
  — the same for picklable Python objects.
* :func:`all_reduce_dict` — :func:`all_reduce_params` over a dict's tensors, in sorted key order
  so that every rank reduces the same tensors together.
* :func:`sync_random_seed` — one random seed drawn on rank 0, shared by all ranks.

Left out compared with MMEngine: process groups (the ``group`` arguments) and the reduce ops other
than sum and mean.
"""
from typing import Any, Dict, Iterable, List, Optional

import numpy as np
import torch
import torch.distributed as torch_dist
from torch import Tensor

from .. import ops
from ..ops.aliases import distinct
from .utils import get_rank, get_world_size

_OPS = ('sum', 'mean')


def _comm_device() -> torch.device:
    """The device the default group's backend communicates on."""
    if torch_dist.get_backend() == 'nccl':
        return torch.device('cuda', torch.cuda.current_device())
    return torch.device('cpu')


def _check_op(op: str) -> None:
    if op not in _OPS:
        raise ValueError(f"op must be one of {_OPS}, but got {op!r}")


def _integer_mean_(total: Tensor, world_size: int) -> Tensor:
    """``total / world_size`` rounded to nearest (halves up), in integer arithmetic, in place."""
    return total.add_(world_size // 2).floor_divide_(world_size)


def _staged(data: Tensor) -> Tensor:
    """``data`` itself when the backend can use it in place, else a contiguous copy on the
    communication device."""
    device = _comm_device()
    if data.device == device and data.is_contiguous():
        return data
    return data.to(device, memory_format=torch.contiguous_format)


def broadcast(data: Tensor, src: int = 0) -> None:
    """Overwrite ``data`` on every rank with rank ``src``'s ``data``."""
    if get_world_size() == 1:
        return
    on_device = _staged(data)
    torch_dist.broadcast(on_device, src)
    if on_device is not data:
        data.copy_(on_device)


def _all_reduce_sum(data: Tensor) -> Tensor:
    """``data`` summed over the ranks, on the communication device (``data`` itself if it can be
    used in place)."""
    on_device = _staged(data)
    torch_dist.all_reduce(on_device, torch_dist.ReduceOp.SUM)
    return on_device


def all_reduce(data: Tensor, op: str = 'sum') -> None:
    """Replace ``data`` by its sum (``op='sum'``) or mean (``op='mean'``) over the ranks.

    A mean of integers is rounded to the nearest integer, halves upward (see the module docstring).
    """
    _check_op(op)
    world_size = get_world_size()
    if world_size == 1:
        return
    if op == 'mean' and data.dtype == torch.bool:
        raise ValueError('all_reduce: bool tensors cannot be averaged')
    total = _all_reduce_sum(data)
    if op == 'mean':
        if total.is_floating_point():
            total.div_(world_size)
        else:
            _integer_mean_(total, world_size)
    if total is not data:
        data.copy_(total)


def _buckets(tensors: List[Tensor], bucket_size_mb: int) -> List[List[Tensor]]:
    """Group the tensors by (dtype, device) in first-seen order; with ``bucket_size_mb > 0`` also
    start a new bucket before one would exceed that size (a bigger tensor gets its own)."""
    groups = {}
    for t in tensors:
        groups.setdefault((t.dtype, t.device), []).append(t)
    if bucket_size_mb <= 0:
        return list(groups.values())
    limit = bucket_size_mb * 1024 * 1024
    buckets = []
    for group in groups.values():
        current, size = [], 0
        for t in group:
            nbytes = t.numel() * t.element_size()
            if current and size + nbytes > limit:
                buckets.append(current)
                current, size = [], 0
            current.append(t)
            size += nbytes
        buckets.append(current)
    return buckets


def all_reduce_params(params: Iterable[Tensor], coalesce: bool = True, bucket_size_mb: int = -1,
                      op: str = 'sum') -> None:
    """All-reduce many tensors (parameters or buffers) in place.

    Args:
        params: tensors or ``nn.Parameter`` s, e.g. ``model.buffers()``; any mix of dtypes.
        coalesce: pack each dtype's tensors into one flat tensor and all-reduce that (one
            collective per dtype); ``False`` all-reduces tensor by tensor.
        bucket_size_mb: with ``coalesce``, cap each flat tensor at this size (several
            collectives per dtype); ``-1`` means no cap.
        op: ``'sum'`` or ``'mean'``; integer means are rounded as the module docstring says.
    """
    _check_op(op)
    world_size = get_world_size()
    if world_size == 1:
        return
    tensors = distinct([p.data for p in params])
    if op == 'mean' and any(t.dtype == torch.bool for t in tensors):
        raise ValueError('all_reduce_params: bool tensors cannot be averaged')
    if not coalesce:
        for t in tensors:
            all_reduce(t, op)
        return
    for bucket in _buckets(tensors, bucket_size_mb):
        (flat, ) = ops.pack(bucket)  # one dtype and device per bucket: one flat tensor
        total = _all_reduce_sum(flat)
        scale = 1.0
        if op == 'mean':
            if total.is_floating_point():
                scale = 1.0 / world_size  # fused into the scatter below
            else:
                _integer_mean_(total, world_size)
        ops.unpack_(total.to(flat.device), bucket, scale)


def all_reduce_dict(data: Dict[str, Tensor], op: str = 'sum') -> None:
    """All-reduce every tensor of ``data`` in place (``op`` as :func:`all_reduce`)."""
    all_reduce_params([data[key] for key in sorted(data)], op=op)


def all_gather(data: Tensor) -> List[Tensor]:
    """Every rank's ``data`` (same shape and dtype on all ranks), as a list in rank order, on
    ``data``'s device; ``[data]`` when not distributed."""
    world_size = get_world_size()
    if world_size == 1:
        return [data]
    on_device = _staged(data)
    gather_list = [torch.empty_like(on_device) for _ in range(world_size)]
    torch_dist.all_gather(gather_list, on_device)
    return [t.to(data.device) for t in gather_list]


def gather(data: Tensor, dst: int = 0) -> List[Tensor]:
    """Every rank's ``data`` as a list in rank order on rank ``dst``; ``[]`` on the other
    ranks; ``[data]`` when not distributed."""
    world_size = get_world_size()
    if world_size == 1:
        return [data]
    on_device = _staged(data)
    if get_rank() == dst:
        gather_list = [torch.empty_like(on_device) for _ in range(world_size)]
        torch_dist.gather(on_device, gather_list, dst)
        return [t.to(data.device) for t in gather_list]
    torch_dist.gather(on_device, None, dst)
    return []


def all_gather_object(data: Any) -> List[Any]:
    """Every rank's picklable ``data``, as a list in rank order; ``[data]`` when not
    distributed."""
    world_size = get_world_size()
    if world_size == 1:
        return [data]
    gather_list: List[Any] = [None] * world_size
    torch_dist.all_gather_object(gather_list, data)
    return gather_list


def gather_object(data: Any, dst: int = 0) -> Optional[List[Any]]:
    """Every rank's picklable ``data`` as a list on rank ``dst``; None on the other ranks."""
    world_size = get_world_size()
    if world_size == 1:
        return [data]
    gather_list: Optional[List[Any]] = [None] * world_size if get_rank() == dst else None
    torch_dist.gather_object(data, gather_list, dst)
    return gather_list


def broadcast_object_list(data: List[Any], src: int = 0) -> None:
    """Overwrite the list ``data`` on every rank with rank ``src``'s items (picklable)."""
    if not isinstance(data, list):
        raise TypeError(f'broadcast_object_list takes a list, but got {type(data).__name__}')
    if get_world_size() > 1:
        torch_dist.broadcast_object_list(data, src)


def sync_random_seed() -> int:
    """Draw a random seed on rank 0 and give the same number to every rank.

    Samplers shuffle with this seed when none is configured, so all ranks must get the *same*
    permutation — otherwise the per-rank slices overlap and some samples are never seen.
    The draw uses NumPy's global generator (``np.random.randint(2**31)``), as MMEngine does, so
    seeding NumPy beforehand makes the result reproducible.
    """
    seed = np.random.randint(2**31)
    if get_world_size() == 1:
        return int(seed)
    random_num = torch.tensor(seed if get_rank() == 0 else 0, dtype=torch.int32,
                              device=_comm_device())
    torch_dist.broadcast(random_num, src=0)
    return int(random_num.item())
