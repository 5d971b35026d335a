"""The fused EMA update: ``ema += weight * (src - ema)`` over many tensors in one call.

This file teaches the two ways minimm runs the averaging step of an averaged model:

* :func:`ema_update_` — one call over lists of tensors. Convenient, but every call converts the
  Python lists (about 0.3 µs per tensor), which dominates on models with thousands of small
  tensors.
* :class:`EMAPlan` — built once from the (EMA, source) tensors; each :meth:`EMAPlan.step` is one
  native call with no per-tensor Python work. It performs a whole MMEngine ``update_parameters``
  call: copy on the first call, average every ``interval``-th call with the rule's weight, mirror
  the buffers, increment ``steps``. On a GPU the step counter and the annealed momentum are read
  by the kernels, so a step never synchronises with the host and can be captured in a CUDA graph.

Every fast path has a PyTorch twin that defines the numbers (:func:`ema_update_ref`, and the
``backend='ref'`` plan). Floating tensors are averaged in float (double for a double EMA) as three
separately rounded operations — ``d = src - ema``, ``p = weight * d``, ``ema + p`` — and rounded
once to the EMA's dtype, so native and reference agree bit for bit. This differs from MMEngine's
``lerp_`` only in the last bit (``lerp_`` may use a fused multiply-add). Integer tensors are
copied. Left out compared with MMEngine: nothing of the arithmetic; the per-tensor Python loop
is what is replaced.
"""
from typing import Optional, Sequence, Union

import torch
from torch import Tensor

from .aliases import first_names
from .loader import native_for

# The averaging rules; the numbers match RuleKind in csrc/minimm_ops.h.
RULES = {'ema': 1, 'anneal': 2, 'swa': 3}


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


def copy_ref(dst: Sequence[Tensor], src: Sequence[Tensor]) -> None:
    """Copy ``src`` into ``dst``; a floating source of another dtype goes through ``dst``'s
    accumulate type (as the kernels do)."""
    for d, s in zip(dst, src):
        d.copy_(s if s.dtype == d.dtype else s.to(_accumulate_dtype(d.dtype)))


def ema_update_ref(ema: Sequence[Tensor], src: Sequence[Tensor], weight: Union[float, Tensor]) -> None:
    """The PyTorch twin of :func:`ema_update_`; it defines the numbers.

    Uses ``torch._foreach_*`` ops (one fused kernel per op on a GPU), so it is also the fallback.
    """
    ema, src = list(ema), list(src)
    _check_pairs('ema_update_ref', ema, src)
    floating = [i for i, e in enumerate(ema) if e.is_floating_point()]
    others = [i for i, e in enumerate(ema) if not e.is_floating_point()]
    if others:
        torch._foreach_copy_([ema[i] for i in others], [src[i] for i in others])
    if not floating:
        return
    acc = [ema[i] if ema[i].dtype == _accumulate_dtype(ema[i].dtype) else ema[i].float() for i in floating]
    diff = torch._foreach_sub([src[i].to(a.dtype) for i, a in zip(floating, acc)], acc)
    torch._foreach_mul_(diff, weight)
    torch._foreach_add_(acc, diff)
    for i, a in zip(floating, acc):
        if a is not ema[i]:
            ema[i].copy_(a)


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
        backend: ``'native'``, ``'ref'``, or None to use the native kernels when they are
            available for the tensors' device.

    The tensors must stay the same objects; a step re-reads their data pointers, so assigning
    ``param.data`` keeps working, but a changed shape, dtype, device or layout is an error (a
    ValueError, on every backend). A tensor listed twice (two names of one tied weight, see
    :mod:`minimm.ops.aliases`) is updated once. Each pair must be dense with equal strides.

    CUDA graphs: a native step captured in a graph replays the raw pointers of that moment, since
    a replay runs no host code. The plan keeps the captured memory alive, so a replay never writes
    freed memory; but after a tensor is re-pointed (``param.data = x``, ``.to()``) a replay keeps
    updating the old memory. The next :meth:`step` outside the graph then raises once, saying to
    capture the graph again.
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

    def step(self, steps: Tensor) -> None:
        """One averaging call; ``steps`` is the 0-dim int64 call counter on the plan's device,
        read before and incremented after (as MMEngine's ``steps`` buffer)."""
        if steps.device != self.device or steps.dtype != torch.long or steps.numel() != 1:
            raise ValueError(f'EMAPlan.step: steps must be a one-element int64 tensor on {self.device}, got '
                             f'{steps.dtype} with {steps.numel()} elements on {steps.device}')
        if self._native is not None:
            self._native.step(steps)
            return
        # What the native plan checks when a tensor was re-pointed: the same error on both backends.
        _check_pairs('EMAPlan', self.ema + self.mirror_ema, self.src + self.mirror_src)
        check_layouts('EMAPlan', self.ema + self.mirror_ema, self.src + self.mirror_src)
        count = int(steps)  # a host read: the reference twin decides in Python
        if count == 0:
            copy_ref(self.ema, self.src)
        elif count % self.interval == 0:
            weight = averaging_weight(self.rule, count, self.momentum, self.gamma, self.interval)
            ema_update_ref(self.ema, self.src, weight)
        copy_ref(self.mirror_ema, self.mirror_src)
        steps += 1
