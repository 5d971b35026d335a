"""The checks every backend makes before the EMA ops touch memory, with the same errors (the
native kernels' twin is csrc/checks.h): pairs that fit, layouts a plan can walk, and no
destination sharing memory with another tensor of the call."""
from typing import Sequence

from torch import Tensor


def check_pairs(name: str, ema: Sequence[Tensor], src: Sequence[Tensor]) -> None:
    """The checks every backend makes, with the same error type (ValueError) and message."""
    if len(ema) != len(src):
        raise ValueError(f'{name}: got {len(ema)} EMA tensors but {len(src)} source tensors')
    device = (list(ema) or list(src) or [None])[0]
    device = device.device if device is not None else None
    for i, (e, s) in enumerate(zip(ema, src)):
        if e.shape != s.shape:
            raise ValueError(f'{name}: pair {i} has shapes {tuple(e.shape)} and {tuple(s.shape)}')
        for t in (e, s):
            if t.device != device:
                raise ValueError(f'{name}: pair {i} has a tensor on {t.device} but pair 0 is on '
                                 f'{device}; all tensors of one call must share a device')
            if t.is_complex():
                raise ValueError(f'{name}: tensor {i} is complex, which is not supported')
        if e.dtype != s.dtype and not (e.is_floating_point() and s.is_floating_point()):
            raise ValueError(f'{name}: pair {i} has dtypes {e.dtype} and {s.dtype}; only floating '
                             'pairs may differ in dtype (non-floating pairs are copied)')


def _dense(t: Tensor) -> bool:
    """``TensorImpl::is_non_overlapping_and_dense``: the elements fill one block of memory, in
    some order of the dimensions (contiguous, channels_last, a transpose...)."""
    expected = 1
    for d in sorted((d for d in range(t.dim()) if t.size(d) >= 2), key=t.stride):
        if t.stride(d) != expected:
            return False
        expected *= t.size(d)
    return True


def check_layouts(name: str, ema: Sequence[Tensor], src: Sequence[Tensor]) -> None:
    """A plan's pairs must be dense with equal strides (its kernels walk both sides as one flat
    block); the list op :func:`ema_update_` instead stages other pairs through contiguous copies."""
    for i, (e, s) in enumerate(zip(ema, src)):
        contiguous = e.is_contiguous() and s.is_contiguous()
        if not (contiguous or (e.stride() == s.stride() and _dense(e))):
            raise ValueError(f'{name}: pair {i} is not dense with equal strides (strides '
                             f'{e.stride()} and {s.stride()}); make both sides contiguous, or give '
                             'both the same memory format')


def _span(t: Tensor, index: int, written: bool):
    """(storage, first byte, last byte, index, written): the memory ``t`` may touch."""
    last = t.storage_offset() + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
    size = t.element_size()
    first = t.storage_offset() * size
    return t.untyped_storage()._cdata, first, (last + 1) * size - 1, index, written


def _same_view(a: Tensor, b: Tensor) -> bool:
    same_storage = a.untyped_storage()._cdata == b.untyped_storage()._cdata
    return (same_storage and a.storage_offset() == b.storage_offset() and a.shape == b.shape
            and a.stride() == b.stride() and a.dtype == b.dtype)


def check_no_overlap(name: str, dst: Sequence[Tensor], src: Sequence[Tensor] = ()) -> None:
    """Memory written by one call is touched by no other tensor of it (csrc/checks.h
    check_no_overlap): two destinations sharing memory, or a destination sharing memory with
    another pair's source, are a ValueError; a pair whose source is its destination is allowed."""
    spans = [_span(t, i, True) for i, t in enumerate(dst) if t.numel()]
    spans += [_span(t, i, False) for i, t in enumerate(src)
              if t.numel() and not (i < len(dst) and _same_view(dst[i], t))]
    spans.sort(key=lambda span: span[:2])
    furthest = {True: None, False: None}  # within one storage: the span reaching furthest, per kind
    for k, span in enumerate(spans):
        if k and spans[k - 1][0] != span[0]:
            furthest = {True: None, False: None}
        storage, first, last, index, written = span
        earlier = furthest[True]
        if written and earlier is not None and earlier[2] >= first:
            raise ValueError(f'{name}: tensors {min(earlier[3], index)} and '
                             f'{max(earlier[3], index)} to be written share memory (the same '
                             'tensor twice, or overlapping views); list each tensor once')
        other = furthest[not written]
        if other is not None and other[2] >= first:
            w, r = (span, other) if written else (other, span)
            raise ValueError(f'{name}: destination {w[3]} shares memory with source {r[3]} (a '
                             'tensor written by one pair and read by another, or overlapping '
                             'views); the update would read values it is writing')
        if furthest[written] is None or last > furthest[written][2]:
            furthest[written] = span
