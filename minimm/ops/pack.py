"""Packing many buffers into one flat tensor per dtype, and scattering them back.

This file teaches the trick behind every "coalesced" all-reduce (MMEngine's
``_all_reduce_coalesced``, MMCV's ``_allreduce_coalesced``, DDP's buckets): one collective over a
flat tensor costs one latency instead of one per buffer. :func:`pack` gathers the tensors into one
flat tensor per (dtype, device), in first-seen order; :func:`unpack_` scatters a flat tensor back
and fuses the ``1 / world_size`` of a 'mean' into the copy. Integer tensors are rounded to the
nearest integer when scaled (ties to even), never truncated toward zero as MMEngine's
``true_divide`` + ``copy_`` does; bool tensors cannot be scaled.

Each tensor starts at a multiple of 16 bytes in its flat tensor (:func:`layout`), so that every
slice is aligned for the kernels' 16-byte loads; the padding between tensors is zero, which is
harmless for an all-reduce. Tensors of any layout are packed in row-major order (a
channels_last or transposed tensor goes through a contiguous copy).

:class:`PackPlan` is the persistent form for buffers packed again and again (BatchNorm statistics
every iteration): it owns its flat buffers and keeps the native per-tensor table, so a pack or
unpack is one native call with no per-tensor Python work. ``pack_ref``/``unpack_ref`` are the
PyTorch twins (``torch.cat`` / slicing) that define the numbers.
Left out compared with MMEngine: size-capped buckets (``bucket_size_mb``; see minimm.dist).
"""
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from .aliases import distinct
from .loader import native_for


def dtype_groups(tensors: Sequence[Tensor]) -> Dict[Tuple[torch.dtype, torch.device], List[int]]:
    """Indices of the tensors per (dtype, device), in first-seen order."""
    groups: Dict[Tuple[torch.dtype, torch.device], List[int]] = {}
    for i, t in enumerate(tensors):
        groups.setdefault((t.dtype, t.device), []).append(i)
    return groups


ALIGN_BYTES = 16  # csrc/table.h kAlignBytes
# The dtypes unpack_ can multiply by a scale (csrc/pack.cpp scale_index); others only copy.
SCALABLE = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
            torch.float32, torch.float64, torch.bfloat16)


def layout(tensors: Sequence[Tensor]) -> Tuple[List[int], int]:
    """Where each of ``tensors`` (one dtype) starts in its flat tensor, and the flat tensor's
    length: back to back, each start rounded up to a multiple of 16 bytes."""
    quantum = max(1, ALIGN_BYTES // tensors[0].element_size()) if tensors else 1
    starts, end = [], 0
    for t in tensors:
        start = -(-end // quantum) * quantum
        starts.append(start)
        end = start + t.numel()
    return starts, end


def _pieces(starts: List[int], tensors: Sequence[Tensor]) -> List[int]:
    """Lengths that split a flat tensor into [padding, tensor, padding, tensor, ...]."""
    sizes, end = [], 0
    for start, t in zip(starts, tensors):
        sizes += [start - end, t.numel()]
        end = start + t.numel()
    return sizes


def _check(name: str, tensors: Sequence[Tensor]) -> None:
    for i, t in enumerate(tensors):
        if t.is_complex():
            raise ValueError(f'{name}: tensor {i} is complex, which is not supported')


def _as_list(flat: Union[Tensor, Sequence[Tensor]]) -> List[Tensor]:
    return [flat] if isinstance(flat, Tensor) else list(flat)


def _scaled(values: Tensor, scale: float) -> Tensor:
    """``values * scale`` in the accumulate type (float, double for double), rounded to nearest for
    integers and clamped into their range; what the kernels compute."""
    if scale == 1.0:
        return values
    if values.dtype == torch.bool:
        raise ValueError(f'unpack_: bool tensors cannot be scaled (scale={scale})')
    if values.dtype not in SCALABLE:
        raise ValueError(f'unpack_: {values.dtype} tensors cannot be scaled; only '
                         f'{", ".join(str(d).replace("torch.", "") for d in SCALABLE)} can')
    if values.is_floating_point():
        acc = torch.float64 if values.dtype == torch.float64 else torch.float32
        return values.to(acc) * scale
    # Clamped into the dtype's range as the kernels do (csrc/pack.h round_into), NaN to 0; the ends
    # of int64 are no doubles, so out-of-range values are set apart from the conversion.
    rounded = torch.round(values.double() * scale).nan_to_num(0.0)
    info = torch.iinfo(values.dtype)
    low, high = rounded <= info.min, rounded >= info.max
    result = rounded.masked_fill(low | high, 0).to(values.dtype)
    return result.masked_fill(low, info.min).masked_fill(high, info.max)


def _pack_group(group: List[Tensor], out: Optional[Tensor] = None) -> Tensor:
    starts, _ = layout(group)
    parts = []
    for size, t in zip(_pieces(starts, group)[::2], group):
        if size:
            parts.append(t.new_zeros(size))
        parts.append(t.reshape(-1))
    return torch.cat(parts, out=out) if out is not None else torch.cat(parts)


def pack_ref(tensors: Sequence[Tensor]) -> List[Tensor]:
    """The PyTorch twin of :func:`pack`."""
    tensors = list(tensors)
    _check('pack', tensors)
    return [_pack_group([tensors[i] for i in group]) for group in dtype_groups(tensors).values()]


def unpack_ref(flat: Union[Tensor, Sequence[Tensor]], tensors: Sequence[Tensor],
               scale: float = 1.0) -> None:
    """The PyTorch twin of :func:`unpack_`."""
    tensors, flats = list(tensors), _as_list(flat)
    _check('unpack_', tensors)
    groups = list(dtype_groups(tensors).values())
    if len(flats) != len(groups):
        raise ValueError(f'unpack_: got {len(flats)} flat tensors but the tensors pack into '
                         f'{len(groups)} (one per dtype and device)')
    for flat_tensor, group in zip(flats, groups):
        members = [tensors[i] for i in group]
        starts, total = layout(members)
        if flat_tensor.numel() != total or flat_tensor.dtype != members[0].dtype:
            raise ValueError(f'unpack_: a flat tensor of {flat_tensor.numel()} {flat_tensor.dtype} '
                             f'elements does not match its {total} {members[0].dtype} elements')
        pieces = torch.split(flat_tensor, _pieces(starts, members))[1::2]
        for t, piece in zip(members, pieces):
            t.copy_(_scaled(piece, scale).view_as(t))


def pack(tensors: Sequence[Tensor]) -> List[Tensor]:
    """One flat tensor per (dtype, device) of ``tensors`` (first-seen order), the tensors back
    to back."""
    tensors = list(tensors)
    if tensors and len({t.device for t in tensors}) == 1 and native_for(tensors[0].device):
        return list(torch.ops.minimm.pack(tensors))
    return pack_ref(tensors)


def unpack_(flat: Union[Tensor, Sequence[Tensor]], tensors: Sequence[Tensor],
            scale: float = 1.0) -> None:
    """Copy ``flat`` (what :func:`pack` returned: a list, or one tensor) back into ``tensors``,
    multiplied by ``scale`` (e.g. ``1 / world_size`` after a SUM all-reduce)."""
    tensors = list(tensors)
    if tensors and len({t.device for t in tensors}) == 1 and native_for(tensors[0].device):
        torch.ops.minimm.unpack_(_as_list(flat), tensors, float(scale))
    else:
        unpack_ref(flat, tensors, scale)


class PackPlan:
    """Packs the same tensors again and again into flat buffers it owns.

    Args:
        tensors: contiguous tensors, any dtypes and devices; a tensor listed twice (under two
            names, see :mod:`minimm.ops.aliases`) is packed once.
        backend: ``'native'``, ``'ref'``, or None for native wherever it is available.

    ``flats`` holds one flat tensor per (dtype, device) in first-seen order; :meth:`pack` fills
    and returns it, :meth:`unpack_` scatters it back (after e.g. an all-reduce of each flat tensor).
    """

    def __init__(self, tensors: Sequence[Tensor], backend: Optional[str] = None):
        if backend not in (None, 'native', 'ref'):
            raise ValueError(f"PackPlan: backend must be 'native', 'ref' or None, got {backend!r}")
        self.tensors = distinct(list(tensors))
        _check('PackPlan', self.tensors)
        for i, t in enumerate(self.tensors):
            if not t.is_contiguous():
                raise ValueError(f'PackPlan: tensor {i} is not contiguous; call .contiguous() '
                                 'first')
        groups = dtype_groups(self.tensors)
        # One native plan per device; each packs its tensors into one flat tensor per dtype.
        devices = list(dict.fromkeys(device for _, device in groups))
        if backend == 'native' and not all(native_for(d) for d in devices):
            raise RuntimeError('PackPlan: no native kernels for some of the devices '
                               f'{[str(d) for d in devices]} (see minimm.ops.backend_info())')
        self._native = {}
        for device in devices:
            if backend != 'ref' and native_for(device):
                members = [t for t in self.tensors if t.device == device]
                self._native[device] = torch.classes.minimm.PackPlan(members)
        self._keys = list(groups)
        self._members = [[self.tensors[i] for i in group] for group in groups.values()]
        self.flats = [self._flat_of(key, members)
                      for key, members in zip(self._keys, self._members)]

    def _flat_of(self, key: Tuple[torch.dtype, torch.device], members: List[Tensor]) -> Tensor:
        dtype, device = key
        if device in self._native:
            native_dtypes = list(dict.fromkeys(t.dtype for t in self.tensors if t.device == device))
            return self._native[device].flats()[native_dtypes.index(dtype)]
        return torch.zeros(layout(members)[1], dtype=dtype, device=device)

    def pack(self) -> List[Tensor]:
        """Copy the tensors into ``flats`` and return ``flats``."""
        for plan in self._native.values():
            plan.pack()
        for key, members, flat in zip(self._keys, self._members, self.flats):
            if key[1] not in self._native:
                _pack_group(members, out=flat)
        return self.flats

    def unpack_(self, scale: float = 1.0) -> None:
        """Copy ``flats`` back into the tensors, multiplied by ``scale``."""
        for plan in self._native.values():
            plan.unpack_(float(scale))
        for key, members, flat in zip(self._keys, self._members, self.flats):
            if key[1] not in self._native:
                unpack_ref(flat, members, scale)
