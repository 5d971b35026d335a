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

Left out compared with MMEngine: process groups, ``all_gather``, ``gather``, ``sync_random_seed``
(see ``minimm/randomness.py``) and the reduce ops other than sum and mean.
"""
from typing import Iterable, List

import torch
import torch.distributed as torch_dist
from torch import Tensor

from .. import ops
from .utils import get_world_size

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
    tensors = ops.distinct([p.data for p in params])
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
