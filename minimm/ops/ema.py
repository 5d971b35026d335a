"""The fused EMA update: ``ema += weight * (src - ema)`` over many tensors in one call.

This file teaches the two ways minimm runs the averaging step of an averaged model:

* :func:`ema_update_` — one call over lists of tensors. Convenient, but every call checks and
  converts the Python lists, which dominates on models with thousands of small tensors.
* :class:`EMAPlan` — built and checked once from the (EMA, source) tensors; each
  :meth:`EMAPlan.step` is one whole MMEngine ``update_parameters`` call with no per-tensor Python
  work: copy on the first call, average every ``interval``-th call with the rule's weight, mirror
  the buffers, increment ``steps``. Natively it is one C++ call (on a GPU one launch per kind of
  pair present, each reading the counter and the annealed weight itself, then one that increments
  the counter: no host synchronisation, CUDA-graph capture).

Two backends, two roundings. The native kernels compute ``d = src - ema``, ``p = weight * d``,
``ema + p`` as three separately rounded operations in float (double for a double EMA) and round
once to the EMA's dtype: the same bits on every machine for finite values (a NaN's payload may
differ between a GPU and the CPU). The PyTorch fallback (the ``*_ref``
functions and the ``backend='ref'`` plan) is MMEngine's own arithmetic, ``lerp_``, run as one
``torch._foreach_lerp_`` call per dtype: one pass over memory and no temporaries, where the
three-rounding formula in ``_foreach_*`` ops would take three passes and a full-size temporary.
``lerp_`` may fuse the multiply-add and switches formula for weights >= 0.5, so per update the
two differ by at most ``FALLBACK_ULPS`` units in the last place of the accumulate type, relative
to ``max(|ema|, |src|)``, plus one unit of the EMA's dtype for fp16/bf16 EMAs (tested in
tests/test_ops_ema.py and tests/test_ops_agree.py). Mixed-dtype pairs (an fp32 EMA of a bf16
source) are the one case where the fallback converts the source first, a temporary per pair.
Integer tensors are copied.
"""
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from .aliases import first_names
from .loader import native_for

# The averaging rules; the numbers match RuleKind in csrc/ema.h.
RULES = {'ema': 1, 'anneal': 2, 'swa': 3}
# The bound above: how many units in the last place the fallback and the kernels may differ.
FALLBACK_ULPS = 4


def averaging_weight(rule: str, steps: int, momentum: float = 0.0, gamma: float = 100.0,
                     interval: int = 1) -> float:
    """The weight of the new value for the averaging call at count ``steps`` (before incrementing).

    ``'ema'``: ``momentum``; ``'anneal'``: ``max(momentum, gamma / (gamma + steps))`` (MMEngine's
    MomentumAnnealingEMA); ``'swa'``: ``1 / (steps // interval + 1)``, the running mean.
    """
    if rule == 'ema':
        return momentum
    if rule == 'anneal':
        return max(momentum, gamma / (gamma + steps))
    if rule == 'swa':
        return 1 / float(steps // interval + 1)
    raise ValueError(f'unknown averaging rule {rule!r}; expected one of {sorted(RULES)}')


def _accumulate_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _check_pairs(name: str, ema: Sequence[Tensor], src: Sequence[Tensor]) -> None:
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
                raise ValueError(f'{name}: pair {i} has a tensor on {t.device} but pair 0 is on {device}; all '
                                 'tensors of one call must share a device')
            if t.is_complex():
                raise ValueError(f'{name}: tensor {i} is complex, which is not supported')
        if e.dtype != s.dtype and not (e.is_floating_point() and s.is_floating_point()):
            raise ValueError(f'{name}: pair {i} has dtypes {e.dtype} and {s.dtype}; only floating pairs may '
                             'differ in dtype (non-floating pairs are copied)')


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
        if not ((e.is_contiguous() and s.is_contiguous()) or (e.stride() == s.stride() and _dense(e))):
            raise ValueError(f'{name}: pair {i} is not dense with equal strides (strides {e.stride()} and '
                             f'{s.stride()}); make both sides contiguous, or give both the same memory format')


def _span(t: Tensor, index: int, written: bool):
    """(storage, first byte, last byte, index, written): the memory ``t`` may touch."""
    last = t.storage_offset() + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
    size = t.element_size()
    return t.untyped_storage()._cdata, t.storage_offset() * size, (last + 1) * size - 1, index, written


def _same_view(a: Tensor, b: Tensor) -> bool:
    return (a.untyped_storage()._cdata == b.untyped_storage()._cdata and a.storage_offset() == b.storage_offset()
            and a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype)


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
            raise ValueError(f'{name}: tensors {min(earlier[3], index)} and {max(earlier[3], index)} to be written '
                             'share memory (the same tensor twice, or overlapping views); list each tensor once')
        other = furthest[not written]
        if other is not None and other[2] >= first:
            w, r = (span, other) if written else (other, span)
            raise ValueError(f'{name}: destination {w[3]} shares memory with source {r[3]} (a tensor written by one '
                             'pair and read by another, or overlapping views); the update would read values it is '
                             'writing')
        if furthest[written] is None or last > furthest[written][2]:
            furthest[written] = span


class _Pairs:
    """(destination, source) pairs sorted once into what one ``_foreach_*`` call per kind takes:
    floating pairs of one dtype per dtype, mixed floating pairs, and the other (copied) pairs."""

    def __init__(self, dst: Sequence[Tensor], src: Sequence[Tensor]):
        self.same: Dict[torch.dtype, Tuple[List[Tensor], List[Tensor]]] = {}
        self.mixed: List[Tuple[Tensor, Tensor]] = []
        self.copied: Tuple[List[Tensor], List[Tensor]] = ([], [])
        for d, s in zip(dst, src):
            if not d.is_floating_point():
                self.copied[0].append(d)
                self.copied[1].append(s)
            elif d.dtype == s.dtype:
                lists = self.same.setdefault(d.dtype, ([], []))
                lists[0].append(d)
                lists[1].append(s)
            else:
                self.mixed.append((d, s))
        self.all = (list(dst), list(src))

    def copy(self) -> None:
        if self.all[0]:
            torch._foreach_copy_(*self.all)

    def average(self, weight: Union[float, Tensor]) -> None:
        """MMEngine's ``lerp_`` for floating pairs, a copy for the others."""
        for dtype, (d, s) in self.same.items():
            if isinstance(weight, Tensor) and weight.device.type != 'cpu':  # read on the device
                torch._foreach_lerp_(d, s, [weight.to(dtype)] * len(d))
            else:
                torch._foreach_lerp_(d, s, float(weight))
        # Mixed pairs one by one, as MMEngine's loop would have to: each converted source is a
        # temporary that stays in cache (converting them all first, for one call, would not).
        for d, s in self.mixed:
            acc = _accumulate_dtype(d.dtype)
            w = weight.to(acc) if isinstance(weight, Tensor) else weight
            if d.dtype == acc:
                d.lerp_(s.to(acc), w)
            else:
                d.copy_(d.to(acc).lerp_(s.to(acc), w))
        if self.copied[0]:
            torch._foreach_copy_(*self.copied)


def ema_update_ref(ema: Sequence[Tensor], src: Sequence[Tensor], weight: Union[float, Tensor]) -> None:
    """The PyTorch fallback of :func:`ema_update_`: MMEngine's ``lerp_`` (see the module docstring
    for how far it may differ from the kernels), with the same checks and errors."""
    ema, src = list(ema), list(src)
    _check_pairs('ema_update_', ema, src)
    check_no_overlap('ema_update_', ema, src)
    _Pairs(ema, src).average(weight)


def ema_update_(ema: Sequence[Tensor], src: Sequence[Tensor], weight: Union[float, Tensor]) -> None:
    """``ema += weight * (src - ema)`` for every floating pair, ``ema.copy_(src)`` for the others.

    Args:
        ema: the tensors updated in place (fp32/fp64/fp16/bf16 or integer).
        src: the new values, same shapes; a floating pair may mix dtypes (fp32 EMA, fp16 source).
        weight: the weight of the new value (MMEngine's momentum), a Python float or a 0-dim
            tensor on the tensors' device (read by the kernel, no host synchronisation) or on the CPU.

    Any layout works: the kernels stage a pair that is not dense with equal strides through
    contiguous copies. Tensors on several devices, or a weight tensor on another GPU, are a
    ValueError before any kernel is chosen.
    """
    ema, src = list(ema), list(src)
    if not ema and not src:
        return
    device = (ema or src)[0].device
    if isinstance(weight, Tensor) and weight.device != device and weight.device.type != 'cpu':
        raise ValueError(f'ema_update_: the weight tensor is on {weight.device} but the tensors on {device}; '
                         'give it on their device or on the CPU')
    if not native_for(device):
        return ema_update_ref(ema, src, weight)
    if isinstance(weight, Tensor):
        torch.ops.minimm.ema_update_(ema, src, weight, 0.0)
    else:
        torch.ops.minimm.ema_update_(ema, src, None, float(weight))


class EMAPlan:
    """A persistent table of (EMA, source) pairs whose :meth:`step` is one MMEngine
    ``update_parameters`` call.

    Args:
        ema, src: the pairs to average (floating) or copy on averaging calls (integer).
        mirror_ema, mirror_src: pairs copied on *every* call (MMEngine's buffers when
            ``update_buffers=False``).
        rule: ``'ema'``, ``'anneal'`` or ``'swa'`` (see :func:`averaging_weight`).
        momentum, gamma, interval: the rule's numbers.
        backend: ``'native'``, ``'ref'`` (the PyTorch fallback), or None to use the native kernels
            when they are available for the tensors' device.

    Everything is checked once, here: shapes, dtypes, one device, each pair dense with equal
    strides, no destination sharing memory with another destination or another pair's source
    (see :func:`check_no_overlap`). A tensor listed twice (two names of one tied
    weight, see :mod:`minimm.ops.aliases`) is updated once.

    A step does no per-tensor work on the host. The tensors must stay the same objects; after
    re-pointing one (``param.data = x``, ``module.to()``), call :meth:`refresh`: the native plan
    keeps its table of addresses until then (the averaged models call it on the signals they
    watch). The fallback's ``_foreach_*`` calls read the tensors as they are, so it follows
    re-pointing by itself; :meth:`refresh` checks both again (a changed shape, dtype, device or
    layout is then a ValueError).

    CUDA graphs: a native step captured in a graph replays the table of that moment, since a
    replay runs no host code. The plan keeps the captured memory alive, so a replay never writes
    freed memory; a :meth:`refresh` that rebuilds the table after a capture warns that the graph
    must be captured again. Keep the plan alive as long as the graph.
    """

    def __init__(self, ema: Sequence[Tensor], src: Sequence[Tensor], mirror_ema: Sequence[Tensor] = (),
                 mirror_src: Sequence[Tensor] = (), *, rule: str = 'ema', momentum: float = 0.0002,
                 gamma: float = 100.0, interval: int = 1, backend: Optional[str] = None):
        if rule not in RULES:
            raise ValueError(f'EMAPlan: unknown rule {rule!r}; expected one of {sorted(RULES)}')
        if not isinstance(interval, int) or interval < 1:
            raise ValueError(f'EMAPlan: interval must be a positive int, got {interval!r}')
        if rule == 'anneal' and not gamma > 0:
            raise ValueError(f'EMAPlan: gamma must be > 0, got {gamma!r}')
        if backend not in (None, 'native', 'ref'):
            raise ValueError(f"EMAPlan: backend must be 'native', 'ref' or None, got {backend!r}")
        ema, src, mirror_ema, mirror_src = list(ema), list(src), list(mirror_ema), list(mirror_src)
        _check_pairs('EMAPlan', ema + mirror_ema, src + mirror_src)
        keep, keep_mirror = first_names(ema), first_names(mirror_ema)
        self.ema, self.src = [ema[i] for i in keep], [src[i] for i in keep]
        self.mirror_ema, self.mirror_src = [mirror_ema[i] for i in keep_mirror], [mirror_src[i] for i in keep_mirror]
        check_layouts('EMAPlan', self.ema + self.mirror_ema, self.src + self.mirror_src)
        check_no_overlap('EMAPlan', self.ema + self.mirror_ema, self.src + self.mirror_src)
        self.rule, self.momentum, self.gamma, self.interval = rule, float(momentum), float(gamma), interval
        first = (self.ema or self.mirror_ema or [torch.empty(0)])[0]
        self.device = first.device
        if backend is None:
            backend = 'native' if native_for(self.device) else 'ref'
        elif backend == 'native' and not native_for(self.device):
            raise RuntimeError(f'EMAPlan: no native kernels for {self.device.type} tensors '
                               '(see minimm.ops.backend_info())')
        self.backend = backend
        self._native = None
        if backend == 'native':
            self._native = torch.classes.minimm.EMAPlan(self.ema, self.src, self.mirror_ema, self.mirror_src,
                                                        RULES[rule], self.momentum, self.gamma, interval)
        else:
            self._pairs, self._mirrored = _Pairs(self.ema, self.src), _Pairs(self.mirror_ema, self.mirror_src)

    def refresh(self) -> bool:
        """Look at the tensors again after some were re-pointed; returns whether the native table
        was rebuilt. Raises the constructor's ValueError when a pair no longer fits."""
        _check_pairs('EMAPlan', self.ema + self.mirror_ema, self.src + self.mirror_src)
        check_layouts('EMAPlan', self.ema + self.mirror_ema, self.src + self.mirror_src)
        if self._native is not None:
            return self._native.refresh()
        self._pairs, self._mirrored = _Pairs(self.ema, self.src), _Pairs(self.mirror_ema, self.mirror_src)
        return False

    @property
    def captured(self) -> bool:
        """Whether a native step of this plan was captured in a CUDA graph that may still be
        replayed: dropping the plan then frees memory the graph uses."""
        return self._native is not None and self._native.captured()

    def step(self, steps: Tensor, count: Optional[int] = None) -> None:
        """One averaging call; ``steps`` is the 0-dim int64 call counter on the plan's device,
        read before and incremented after (as MMEngine's ``steps`` buffer). ``count`` is its value
        when the caller knows it without reading the device (the averaged models keep it on the
        host); else the fallback reads it, which waits for the device. The kernels ignore it."""
        if self._native is not None:
            self._native.step(steps)
            return
        if steps.device != self.device or steps.dtype != torch.long or steps.numel() != 1:
            raise ValueError(f'EMAPlan.step: steps must be a one-element int64 tensor on {self.device}, got '
                             f'{steps.dtype} with {steps.numel()} elements on {steps.device}')
        if count is None:
            count = int(steps)  # a host read: the fallback decides in Python
        if count == 0:
            self._pairs.copy()
        elif count % self.interval == 0:
            self._pairs.average(averaging_weight(self.rule, count, self.momentum, self.gamma, self.interval))
        self._mirrored.copy()
        steps += 1
