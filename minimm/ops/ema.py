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
import math
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from . import sharding
from .aliases import first_names
from .checks import check_layouts, check_no_overlap, check_pairs
from .loader import native_for

# The averaging rules; the numbers match RuleKind in csrc/ema.h.
RULES = {'ema': 1, 'anneal': 2, 'swa': 3, 'power': 4}
# At most this many averaged copies of one source in one plan (csrc/ema.h kMaxTargets).
MAX_TARGETS = 8
# The weight of the new value when none is given: MMEngine's ExponentialMovingAverage default, the
# one default of minimm's averaged models, hooks and plans.
DEFAULT_MOMENTUM = 0.0002
# The bound above: how many units in the last place the fallback and the kernels may differ.
FALLBACK_ULPS = 4


def averaging_weight(rule: str, steps: int, momentum: float = DEFAULT_MOMENTUM,
                     gamma: float = 100.0, interval: int = 1) -> float:
    """The weight of the new value for the averaging call at count ``steps`` (before incrementing).

    ``'ema'``: ``momentum``; ``'anneal'``: ``max(momentum, gamma / (gamma + steps))`` (MMEngine's
    MomentumAnnealingEMA); ``'swa'``: ``1 / (steps // interval + 1)``, the running mean;
    ``'power'``: ``1 - (1 - 1/t) ** (gamma + 1)`` at the t-th averaging call, ``t = steps //
    interval + 1`` (PowerFunctionEMA; ``gamma = 0`` is ``'swa'``).
    """
    if rule == 'ema':
        return momentum
    if rule == 'anneal':
        return max(momentum, gamma / (gamma + steps))
    if rule == 'swa':
        return 1 / float(steps // interval + 1)
    if rule == 'power':  # the same operations as csrc/ema.h step_weight, in double
        return 1.0 - _power_beta(float(steps // interval + 1), gamma + 1.0)
    raise ValueError(f'unknown averaging rule {rule!r}; expected one of {sorted(RULES)}')


_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e+00


def _power_beta(t: float, y: float) -> float:
    """``(1 - 1/t) ** y`` from + - * / alone, operation for operation as csrc/ema.h power_beta
    (which says why): the same bits here, on the CPU kernels and on a GPU."""
    if t <= 1.0:
        return 0.0
    s = -1.0 / (2.0 * t - 1.0)
    q, series = s * s, 0.0
    for n in range(19, -1, -1):
        series = 1.0 / (2.0 * n + 1.0) + q * series
    u = y * (2.0 * (s * series))
    if u < -800.0:
        return 0.0
    k = float(round(u * _INV_LN2))
    r = (u - k * _LN2_HI) - k * _LN2_LO
    e = 1.0
    for n in range(20, 0, -1):
        e = 1.0 + (r * e) / float(n)
    return math.ldexp(e, int(k))


def _accumulate_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


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


def ema_update_ref(ema: Sequence[Tensor], src: Sequence[Tensor],
                   weight: Union[float, Tensor]) -> None:
    """The PyTorch fallback of :func:`ema_update_`: MMEngine's ``lerp_`` (see the module docstring
    for how far it may differ from the kernels), with the same checks and errors."""
    ema, src = list(ema), list(src)
    check_pairs('ema_update_', ema, src)
    check_no_overlap('ema_update_', ema, src)
    _Pairs(ema, src).average(weight)


def ema_update_(ema: Sequence[Tensor], src: Sequence[Tensor], weight: Union[float, Tensor]) -> None:
    """``ema += weight * (src - ema)`` for every floating pair, ``ema.copy_(src)`` for the others.

    Args:
        ema: the tensors updated in place (fp32/fp64/fp16/bf16 or integer).
        src: the new values, same shapes; a floating pair may mix dtypes (fp32 EMA, fp16 source).
        weight: the weight of the new value (MMEngine's momentum), a Python float or a 0-dim
            tensor on the tensors' device (read by the kernel, no host synchronisation) or on
            the CPU.

    Any layout works: the kernels stage a pair that is not dense with equal strides through
    contiguous copies. Tensors on several devices, or a weight tensor on another GPU, are a
    ValueError before any kernel is chosen.
    """
    ema, src = list(ema), list(src)
    if not ema and not src:
        return
    device = (ema or src)[0].device
    if isinstance(weight, Tensor) and weight.device != device and weight.device.type != 'cpu':
        raise ValueError(f'ema_update_: the weight tensor is on {weight.device} but the tensors '
                         f'on {device}; give it on their device or on the CPU')
    if not native_for(device):
        return ema_update_ref(ema, src, weight)
    sharding.register()  # DTensors (FSDP2's shards) need the op's sharding rule: ops/sharding.py
    if isinstance(weight, Tensor):
        torch.ops.minimm.ema_update_(ema, src, weight, 0.0)
    else:
        torch.ops.minimm.ema_update_(ema, src, None, float(weight))


class EMATarget(NamedTuple):
    """One averaged copy in a plan: its tensors (in the plan's source order) and its rule."""
    ema: Sequence[Tensor]
    mirror_ema: Sequence[Tensor] = ()
    rule: str = 'ema'
    momentum: float = DEFAULT_MOMENTUM
    gamma: float = 100.0
    interval: int = 1


def _check_target(target: EMATarget) -> None:
    if target.rule not in RULES:
        raise ValueError(f'EMAPlan: unknown rule {target.rule!r}; expected one of {sorted(RULES)}')
    if not isinstance(target.interval, int) or target.interval < 1:
        raise ValueError(f'EMAPlan: interval must be a positive int, got {target.interval!r}')
    if target.rule == 'anneal' and not target.gamma > 0:
        raise ValueError(f'EMAPlan: gamma must be > 0, got {target.gamma!r}')
    if target.rule == 'power' and not target.gamma > -1:
        raise ValueError(f"EMAPlan: rule 'power' needs gamma > -1, got {target.gamma!r}")


def _check_like(k: int, first: Sequence[Tensor], other: Sequence[Tensor]) -> None:
    """The averaged copies of one plan share dtypes, shapes and strides, tensor by tensor."""
    if len(other) != len(first):
        raise ValueError(f'EMAPlan: target {k} has {len(other)} tensors, target 0 has {len(first)}')
    for i, (a, b) in enumerate(zip(first, other)):
        if (a.dtype, a.shape, a.stride()) != (b.dtype, b.shape, b.stride()):
            raise ValueError(f'EMAPlan: tensor {i} of target {k} is {b.dtype} {tuple(b.shape)} '
                             f'with strides {b.stride()}, but target 0 has {a.dtype} '
                             f'{tuple(a.shape)} with strides {a.stride()}; every target must '
                             'match target 0')


class EMAPlan:
    """A persistent table of (EMA, source) pairs whose :meth:`step` is one MMEngine
    ``update_parameters`` call.

    Args:
        ema, src: the pairs to average (floating) or copy on averaging calls (integer).
        mirror_ema, mirror_src: pairs copied on *every* call (MMEngine's buffers when
            ``update_buffers=False``).
        rule: ``'ema'``, ``'anneal'``, ``'swa'`` or ``'power'`` (see :func:`averaging_weight`).
        momentum, gamma, interval: the rule's numbers.
        backend: ``'native'``, ``'ref'`` (the PyTorch fallback), or None to use the native kernels
            when they are available for the tensors' device.

    :meth:`joint` builds one plan for several averaged copies of the same sources (up to
    ``MAX_TARGETS``, each with its own rule and counter): a step reads each source chunk once and
    updates every copy from it while it is in cache, with the same numbers as one plan per copy.

    Everything is checked once, here: shapes, dtypes, one device, each pair dense with equal
    strides, no destination sharing memory with another destination or another pair's source
    (see :func:`check_no_overlap`). A tensor listed twice (two names of one tied
    weight, see :mod:`minimm.ops.aliases`) is updated once.

    A step does no per-tensor work on the host. The tensors must stay the same objects; after
    re-pointing one (``param.data = x``, ``module.to()``), call :meth:`refresh`: the native plan
    keeps its table of addresses until then (the averaged models' fast path calls it on the
    signals it watches, minimm/ops/averaging.py). The fallback's ``_foreach_*`` calls read the
    tensors as they are, so it follows re-pointing by itself; :meth:`refresh` checks both again
    (a changed shape, dtype, device or layout is then a ValueError).

    CUDA graphs: a native step captured in a graph replays the table of that moment, since a
    replay runs no host code. The plan keeps the captured memory alive, so a replay never writes
    freed memory; a :meth:`refresh` that rebuilds the table after a capture warns that the graph
    must be captured again. Keep the plan alive as long as the graph.
    """

    def __init__(self, ema: Sequence[Tensor], src: Sequence[Tensor],
                 mirror_ema: Sequence[Tensor] = (), mirror_src: Sequence[Tensor] = (), *,
                 rule: str = 'ema', momentum: float = DEFAULT_MOMENTUM, gamma: float = 100.0,
                 interval: int = 1, backend: Optional[str] = None):
        target = EMATarget(ema, mirror_ema, rule, momentum, gamma, interval)
        self._build([target], src, mirror_src, backend)

    @classmethod
    def joint(cls, targets: Sequence[EMATarget], src: Sequence[Tensor],
              mirror_src: Sequence[Tensor] = (), backend: Optional[str] = None) -> 'EMAPlan':
        """One plan averaging ``src`` (and mirroring ``mirror_src``) into every target; its
        :meth:`step` takes one counter per target."""
        plan = cls.__new__(cls)
        plan._build(targets, src, mirror_src, backend)
        return plan

    def _build(self, targets, src, mirror_src, backend) -> None:
        if not 1 <= len(targets) <= MAX_TARGETS:
            raise ValueError(f'EMAPlan: 1 to {MAX_TARGETS} targets per plan, got {len(targets)}')
        for target in targets:
            _check_target(target)
        if backend not in (None, 'native', 'ref'):
            raise ValueError(f"EMAPlan: backend must be 'native', 'ref' or None, got {backend!r}")
        src, mirror_src = list(src), list(mirror_src)
        first = targets[0]
        for target in targets:
            check_pairs('EMAPlan', list(target.ema) + list(target.mirror_ema), src + mirror_src)
        keep, keep_mirror = first_names(list(first.ema)), first_names(list(first.mirror_ema))
        self.targets = []
        for k, target in enumerate(targets):
            ema = [target.ema[i] for i in keep]
            mirror_ema = [target.mirror_ema[i] for i in keep_mirror]
            if k:
                _check_like(k, self.ema + self.mirror_ema, ema + mirror_ema)
            self.targets.append(target._replace(ema=ema, mirror_ema=mirror_ema,
                                                momentum=float(target.momentum),
                                                gamma=float(target.gamma)))
            self.ema, self.mirror_ema = self.targets[0].ema, self.targets[0].mirror_ema
        self.src, self.mirror_src = [src[i] for i in keep], [mirror_src[i] for i in keep_mirror]
        written = [t for target in self.targets for t in target.ema + target.mirror_ema]
        read = (self.src + self.mirror_src) * len(self.targets)
        check_layouts('EMAPlan', written, read)
        check_no_overlap('EMAPlan', written, read)
        first = self.targets[0]
        self.rule, self.momentum, self.gamma = first.rule, first.momentum, first.gamma
        self.interval = first.interval
        self.device = (written or [torch.empty(0)])[0].device
        if backend is None:
            backend = 'native' if native_for(self.device) else 'ref'
        elif backend == 'native' and not native_for(self.device):
            raise RuntimeError(f'EMAPlan: no native kernels for {self.device.type} tensors '
                               '(see minimm.ops.backend_info())')
        self.backend = backend
        self._native = None
        if backend == 'native':
            self._native = torch.classes.minimm.EMAPlan(
                [t for target in self.targets for t in target.ema], self.src,
                [t for target in self.targets for t in target.mirror_ema], self.mirror_src,
                [RULES[t.rule] for t in self.targets], [t.momentum for t in self.targets],
                [t.gamma for t in self.targets], [t.interval for t in self.targets])
        else:
            self._sort_pairs()

    def _sort_pairs(self) -> None:
        self._pairs = [(_Pairs(t.ema, self.src), _Pairs(t.mirror_ema, self.mirror_src))
                       for t in self.targets]

    def refresh(self) -> bool:
        """Look at the tensors again after some were re-pointed; returns whether the native table
        was rebuilt. Raises the constructor's ValueError when a pair no longer fits."""
        for k, target in enumerate(self.targets):
            check_pairs('EMAPlan', target.ema + target.mirror_ema, self.src + self.mirror_src)
            check_layouts('EMAPlan', target.ema + target.mirror_ema, self.src + self.mirror_src)
            if k:
                _check_like(k, self.ema + self.mirror_ema, target.ema + target.mirror_ema)
        if self._native is not None:
            return self._native.refresh()
        self._sort_pairs()
        return False

    @property
    def captured(self) -> bool:
        """Whether a native step of this plan was ever captured in a CUDA graph (the graph keeps
        the memory it replays alive itself, csrc/multi_tensor_apply.cuh keep_for_graph)."""
        return self._native is not None and self._native.captured()

    def step(self, steps: Union[Tensor, Sequence[Tensor]],
             count: Union[None, int, Sequence[int]] = None) -> None:
        """One averaging call; ``steps`` is the 0-dim int64 call counter on the plan's device
        (one per target, in a list, for a :meth:`joint` plan), read before and incremented after
        (as MMEngine's ``steps`` buffer). ``count`` is its value (a list of them for a joint plan)
        when the caller knows it without reading the device (the averaged models keep it on the
        host); else the fallback reads it, which waits for the device. The kernels ignore it."""
        counters = [steps] if isinstance(steps, Tensor) else list(steps)
        if len(counters) != len(self.targets):
            raise ValueError(f'EMAPlan.step: {len(self.targets)} targets need as many counters, '
                             f'got {len(counters)}')
        if self._native is not None:
            if isinstance(steps, Tensor):
                self._native.step(steps)
            else:
                self._native.step_all(counters)
            return
        for counter in counters:
            if counter.device != self.device or counter.dtype != torch.long or counter.numel() != 1:
                raise ValueError(f'EMAPlan.step: steps must be a one-element int64 tensor on '
                                 f'{self.device}, got {counter.dtype} with {counter.numel()} '
                                 f'elements on {counter.device}')
        counts = ([None] * len(counters) if count is None
                  else [count] if isinstance(count, int) else list(count))
        for target, (pairs, mirrored), steps, count in zip(self.targets, self._pairs, counters,
                                                          counts):
            if count is None:
                count = int(steps)  # a host read: the fallback decides in Python
            if count == 0:
                pairs.copy()
            elif count % target.interval == 0:
                pairs.average(averaging_weight(target.rule, count, target.momentum, target.gamma,
                                               target.interval))
            mirrored.copy()
            steps += 1
