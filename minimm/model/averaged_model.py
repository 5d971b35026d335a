"""Averaged models: a copy of a model whose weights are a running average of the model's weights.

This file teaches MMEngine's three averaging rules and the one bookkeeping they share, as
MMEngine 0.10's ``BaseAveragedModel`` and its subclasses:

* the averaged copy is ``self.module`` (a deep copy, ``requires_grad`` off) and the call counter is
  the int64 buffer ``steps``, so a state dict has the keys ``steps`` and ``module.<name>``; the
  counter lives on the averaged copy's device (MMEngine puts it on ``device``, the CPU by default),
  moves with it on ``.to()``, and a checkpoint's counter is copied onto it when loaded;
* ``update_parameters(model)`` is one step: the first call (``steps == 0``) copies every entry;
  afterwards every ``interval``-th call (counted *before* incrementing) averages; the momentum is
  not rescaled for ``interval > 1``;
* **momentum is the weight of the new value**: ``avg = (1 - m) * avg + m * src``, the opposite of
  timm/torch's ``decay`` (MMEngine momentum 0.0002 == timm decay 0.9998; ``decay=`` is accepted
  as an alias, giving both is an error, and a momentum above 0.5 draws a warning);
* with ``update_buffers=False`` the buffers (BatchNorm statistics) are mirrored on every call;
  with ``update_buffers=True`` they are averaged like parameters.

Differences from MMEngine, on purpose:

* ``update_parameters`` is MMEngine's per-entry loop calling ``avg_func``, with one fork before
  it: when the class's ``avg_func`` is one of the built-in ones (``PLAN_RULES``), the whole step
  runs as one fused plan call instead (:class:`minimm.ops.averaging.FusedAveraging`: native
  C++/CUDA when available, else its PyTorch fallback, MMEngine's ``lerp_``; that module also says
  how the plan follows tensors replaced in either model). The fast path knows nothing of these
  classes: :func:`plan_record` hands it one record of the tensors, rules and counters, when it
  asks (only to build or rebuild a plan). A subclass that overrides ``avg_func`` gets the loop,
  so custom rules keep working. :attr:`backend` and :meth:`describe` say which path runs
  (EMAHook logs it). :class:`~minimm.model.averaging_group.AveragingGroup` updates several
  averaged models of one source in one pass (PostHocEMAHook's EMAs).
* A tensor with two names (tied weights, listed twice by ``state_dict()``) is averaged once;
  MMEngine averages it once per name.
* Integer buffers (BatchNorm's ``num_batches_tracked``) with ``update_buffers=True`` are *copied*
  on every averaging call; MMEngine copies them on the first call and then silently freezes them.
* The native kernels compute ``avg + m * (src - avg)`` with three roundings instead of ``lerp_``:
  equal to MMEngine up to a few units in the last place of each update (see minimm/ops/ema.py).
* ``ema_dtype`` (keyword only, a minimm addition): keep the averaged copy's floating tensors in
  another dtype than the model's, e.g. fp32 for a model trained in bf16, whose own-dtype EMA stops
  moving (minimm/ops/ema_stall.py, which also warns when that happens). The kernels average a
  bf16 source into an fp32 copy in one pass; ``EMAHook`` casts back for validation and checkpoints.

* A model whose parameters are DTensors (sharded over processes, e.g. by FSDP2's
  ``fully_shard``) is averaged shard by shard: the copy keeps their placements, so each rank's
  averaged copy holds its own shards only, and the plan updates the local shards (no gather, no
  host read). A ``fully_shard``-ed model refuses a deep copy: its copy is made module by module
  without FSDP's classes and hooks (minimm/model/averaged_copy.py).

Added: :class:`PowerFunctionEMA`, EDM2's power-function EMA (the rule that post-hoc EMA,
minimm/model/posthoc_ema.py, builds on); MMEngine has no such class.

Left out: nothing of the public API; the averaged copy is kept as ordinary tensors (no flat
buffer), so ``load_state_dict`` copies into them in place as usual.
"""
import itertools
import math
import numbers
import warnings
from typing import Dict, Optional

import numpy as np
import torch
from torch import Tensor, nn

from minimm.dist.utils import is_dtensor
from minimm.ops import (DEFAULT_MOMENTUM, AveragingRecord, EMATarget, FusedAveraging,
                        averaging_weight, ema_update_ref, first_names)
from minimm.registry import MODELS
from .averaged_copy import averaged_copy
from .host_count import HostCount

EMA_DTYPES = ('float16', 'bfloat16', 'float32', 'float64')
# PowerFunctionEMA: widths up to about 0.3003 have a power-function profile (a root gamma > -1).
SIGMA_REL_MAX = 0.3


class BaseAveragedModel(nn.Module):
    """The shared bookkeeping of the averaged models; subclasses define :meth:`avg_func`.

    Args:
        model: the model to average; copied into ``self.module`` (:func:`averaged_copy`).
        interval: average on every ``interval``-th call of :meth:`update_parameters`.
        device: where the averaged copy lives (default: where ``model`` is).
        update_buffers: average the buffers too (else they are mirrored on every call).
        ema_dtype: the dtype of the averaged copy's floating tensors (a torch dtype or its name,
            e.g. ``'float32'``); default: the model's own.
    """

    def __init__(self, model: nn.Module, interval: int = 1, device: Optional[torch.device] = None,
                 update_buffers: bool = False, *, ema_dtype=None) -> None:
        super().__init__()
        if not isinstance(interval, int) or isinstance(interval, bool) or interval < 1:
            raise ValueError(f'interval must be a positive int, got {interval!r}')
        self.module = averaged_copy(model).requires_grad_(False)
        self.interval = interval
        self.ema_dtype = _parse_ema_dtype(ema_dtype)
        if device is not None:
            self.module = self.module.to(device)
        if self.ema_dtype is not None:  # floating tensors only; the counter stays int64
            self.module = self.module.to(self.ema_dtype)
        # The counter sits with the averaged copy, which a plan step updates on its device.
        first = next(itertools.chain(self.module.parameters(), self.module.buffers()), None)
        device = first.device if first is not None else device
        self.register_buffer('steps', torch.tensor(0, dtype=torch.long, device=device))
        self.update_buffers = update_buffers
        self._fused = FusedAveraging()  # the fast path's state (minimm/ops/averaging.py)
        self._host_steps = HostCount(self.steps, 0)  # the plan's fallback and the loop read it
        self._conversions = 0  # .to(), .half()...: an AveragingGroup's plan is then rebuilt

    @property
    def avg_parameters(self) -> Dict[str, Tensor]:
        """The averaged entries of ``self.module`` by name (MMEngine's attribute)."""
        return self._averaged_entries(self.module)

    def _averaged_entries(self, module: nn.Module) -> Dict[str, Tensor]:
        """MMEngine's choice of entries, ``state_dict()`` with ``update_buffers`` and
        ``named_parameters()`` without, as the module's own tensors rather than detached aliases,
        so that the plan follows a ``param.data = ...`` reassignment; the first name of a tensor
        with several (tied weights) only."""
        if not self.update_buffers:
            return dict(module.named_parameters())
        tensors = dict(module.named_parameters())
        tensors.update(module.named_buffers())
        entries = [(name, tensors.get(name, value)) for name, value in module.state_dict().items()]
        return dict(entries[i] for i in first_names([t for _, t in entries]))

    def avg_func(self, averaged_param: Tensor, source_param: Tensor, steps: Tensor) -> None:
        """Average ``source_param`` into ``averaged_param`` in place at call count ``steps``."""
        raise NotImplementedError(f'{type(self).__name__} must implement avg_func')

    def weight_args(self) -> dict:
        """The numbers of this class's rule, as :func:`minimm.ops.averaging_weight` takes them
        (``interval`` aside)."""
        return {}

    def forward(self, *args, **kwargs):
        """Run the averaged copy."""
        return self.module(*args, **kwargs)

    def _apply(self, fn, *args, **kwargs):
        # .to(), .half(), .cuda()... replace the module's tensors: the plan is rebuilt.
        self._fused.forget(type(self).__name__)
        self._conversions += 1
        return super()._apply(fn, *args, **kwargs)

    def _source_entries(self, model: nn.Module, names) -> Dict[str, Tensor]:
        src = self._averaged_entries(model)
        missing = [name for name in names if name not in src]
        if missing:
            raise ValueError(f'update_parameters: the model has no {missing[:3]} (it is not the '
                             f'model this {type(self).__name__} was built from)')
        return src

    @torch.no_grad()
    def update_parameters(self, model: nn.Module) -> None:
        """One averaging step from ``model`` (see the module docstring for what each call does)."""
        if self._fused.step(model, self._plan_record):
            return  # the whole step ran as one fused plan call
        averaged = self.avg_parameters
        src_parameters = self._source_entries(model, averaged)
        steps = self._host_steps.get(self.steps)
        for name, p_avg in averaged.items():
            source = src_parameters[name].detach().to(p_avg.device)
            if steps == 0 or (steps % self.interval == 0 and not p_avg.is_floating_point()):
                p_avg.copy_(source)
            elif steps % self.interval == 0:
                self.avg_func(p_avg, source, self.steps)
        if not self.update_buffers:
            for b_avg, b_src in zip(self.module.buffers(), model.buffers()):
                b_avg.copy_(b_src.detach().to(b_avg.device))
        self.steps += 1
        self._host_steps.incremented(self.steps)

    @property
    def backend(self) -> Optional[str]:
        """How the last update ran (or :meth:`describe` would run one): ``'native'`` (the fused
        C++/CUDA plan), ``'ref'`` (the plan's PyTorch fallback), ``'loop'`` (MMEngine's per-entry
        loop); None before either was called."""
        return self._fused.backend

    def describe(self, model: nn.Module) -> str:
        """One line saying how :meth:`update_parameters` averages ``model``, e.g.
        ``fused native plan on cuda:0, 161 tensors (25.6 M values)``, or why it falls back."""
        return self._fused.describe(model, self._plan_record)

    def _plan_record(self, model: nn.Module) -> AveragingRecord:
        return plan_record([self], model)


def _parse_ema_dtype(ema_dtype) -> Optional[torch.dtype]:
    """None, a floating torch dtype, or its name (``'float32'``, ``'torch.float32'``) as a dtype."""
    if ema_dtype is None:
        return None
    name = str(ema_dtype).replace('torch.', '')
    if name not in EMA_DTYPES:
        raise ValueError(f'ema_dtype must be one of {list(EMA_DTYPES)} (or the torch dtype), '
                         f'got {ema_dtype!r}')
    return getattr(torch, name)


def _check_momentum(momentum: Optional[float], decay: Optional[float]) -> float:
    for name, value in (('momentum', momentum), ('decay', decay)):
        # A string from a config ('0.01') would otherwise fail inside the range check below.
        if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
            raise TypeError(f'EMA {name}={value!r} is a {type(value).__name__}: it must be a '
                            'number in (0, 1)')
    if momentum is not None and decay is not None:
        raise ValueError(f'give momentum or decay, not both (got momentum={momentum}, '
                         f'decay={decay}); MMEngine momentum = 1 - decay')
    if decay is not None:
        if not 0.0 < decay < 1.0:
            raise ValueError(f'decay must be in (0, 1), got {decay}')
        momentum = 1.0 - decay
    elif momentum is None:
        momentum = DEFAULT_MOMENTUM
    if not 0.0 < momentum < 1.0:
        raise ValueError(f'momentum must be in (0, 1), got {momentum}')
    if momentum > 0.5:
        warnings.warn(f'EMA momentum={momentum} is the weight of the *new* value (MMEngine '
                      'convention), so it is usually small, e.g. 0.0002; a value near 1 looks like '
                      'a timm/torch decay (pass decay= for that). Please make sure the value is '
                      'correct.', stacklevel=3)
    return float(momentum)


@MODELS.register_module()
class ExponentialMovingAverage(BaseAveragedModel):
    """``avg = (1 - momentum) * avg + momentum * src`` on every averaging call.

    Args:
        model, interval, device, update_buffers: see :class:`BaseAveragedModel`.
        momentum: the weight of the new value (default 0.0002).
        decay: timm/torch-style alias, ``momentum = 1 - decay``; give one of the two.
        ema_dtype: see :class:`BaseAveragedModel`.
    """

    def __init__(self, model: nn.Module, momentum: Optional[float] = None, interval: int = 1,
                 device: Optional[torch.device] = None, update_buffers: bool = False, *,
                 decay: Optional[float] = None, ema_dtype=None) -> None:
        momentum = _check_momentum(momentum, decay)
        super().__init__(model, interval, device, update_buffers, ema_dtype=ema_dtype)
        self.momentum = momentum

    def weight_args(self) -> dict:
        return dict(momentum=self.momentum)

    def avg_func(self, averaged_param: Tensor, source_param: Tensor, steps: Tensor) -> None:
        ema_update_ref([averaged_param], [source_param], self.momentum)


@MODELS.register_module()
class MomentumAnnealingEMA(ExponentialMovingAverage):
    """EMA whose momentum starts high and anneals: ``m_t = max(momentum, gamma / (gamma + steps))``.

    Early averages follow the model closely instead of staying near the initial weights. With
    gamma=4 and momentum=0.01 the first averaging calls use 0.8, 0.667, 0.571, ...

    Args:
        gamma: the annealing horizon (> 0); see :class:`ExponentialMovingAverage` for the rest.
    """

    def __init__(self, model: nn.Module, momentum: Optional[float] = None, gamma: int = 100,
                 interval: int = 1, device: Optional[torch.device] = None,
                 update_buffers: bool = False, *, decay: Optional[float] = None,
                 ema_dtype=None) -> None:
        if not gamma > 0:
            raise ValueError(f'gamma must be > 0, got {gamma}')
        super().__init__(model, momentum, interval, device, update_buffers, decay=decay,
                         ema_dtype=ema_dtype)
        self.gamma = gamma

    def weight_args(self) -> dict:
        return dict(momentum=self.momentum, gamma=self.gamma)

    def avg_func(self, averaged_param: Tensor, source_param: Tensor, steps: Tensor) -> None:
        weight = averaging_weight('anneal', int(steps), self.momentum, self.gamma)
        ema_update_ref([averaged_param], [source_param], weight)


@MODELS.register_module()
class StochasticWeightAverage(BaseAveragedModel):
    """The running arithmetic mean of the weights seen at the averaging calls:
    ``avg += (src - avg) / (steps // interval + 1)``; with inputs 1, 2, 3, 6 it gives 1, 1.5, 2,
    3."""

    def avg_func(self, averaged_param: Tensor, source_param: Tensor, steps: Tensor) -> None:
        weight = averaging_weight('swa', int(steps), interval=self.interval)
        ema_update_ref([averaged_param], [source_param], weight)


def power_gamma(sigma_rel: float) -> float:
    """The exponent of the power-function EMA of relative width ``sigma_rel`` (EDM2): the largest
    real root of ``g**3 + 7 g**2 + (16 - s**-2) g + (12 - s**-2) = 0``, which is
    :func:`power_sigma_rel` solved for ``g``."""
    inv = sigma_rel ** -2
    roots = np.roots([1.0, 7.0, 16.0 - inv, 12.0 - inv])
    return float(max(r.real for r in roots if abs(r.imag) <= 1e-9 * max(1.0, abs(r.real))))


def power_sigma_rel(gamma: float) -> float:
    """The relative width of the power-function EMA profile ``t**gamma`` on [0, 1]: its standard
    deviation divided by its end, ``sqrt((g + 1) / ((g + 2)**2 (g + 3)))``."""
    return math.sqrt((gamma + 1) / ((gamma + 2) ** 2 * (gamma + 3)))


def _check_power(sigma_rel, gamma) -> float:
    """The exponent from ``sigma_rel=`` or ``gamma=`` (one of the two), checked."""
    if (sigma_rel is None) == (gamma is None):
        raise ValueError('PowerFunctionEMA: give sigma_rel or gamma, exactly one (got '
                         f'sigma_rel={sigma_rel!r}, gamma={gamma!r})')
    key, value = ('sigma_rel', sigma_rel) if gamma is None else ('gamma', gamma)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        raise TypeError(f'PowerFunctionEMA: {key}={value!r} must be a number')
    if key == 'sigma_rel':
        if not 0 < value < SIGMA_REL_MAX:
            raise ValueError(f'PowerFunctionEMA: sigma_rel={value!r} must be in (0, '
                             f'{SIGMA_REL_MAX}); EDM2 uses 0.05 to 0.2')
        return power_gamma(float(value))
    if not -1 < value < math.inf:
        raise ValueError(f'PowerFunctionEMA: gamma={value!r} must be a finite number > -1')
    return float(value)


@MODELS.register_module()
class PowerFunctionEMA(BaseAveragedModel):
    """EDM2's power-function EMA (Karras et al., 2024), a minimm addition: at the t-th averaging
    call ``avg = beta_t * avg + (1 - beta_t) * src`` with ``beta_t = (1 - 1/t) ** (gamma + 1)``.

    The first call copies (``beta_1 = 0``); afterwards the average keeps a fixed *share* of the
    run, weighting the weights seen at time ``tau`` in proportion to ``tau ** gamma``, however
    long it runs: ``sigma_rel`` is that profile's width relative to the run's length (0.10: about
    the last tenth). ``gamma = 0`` is :class:`StochasticWeightAverage`. PostHocEMAHook keeps
    several and :func:`minimm.model.posthoc_ema.synthesize` builds any width after training.

    Args:
        sigma_rel: the relative width, in (0, 0.3); or
        gamma: the exponent (> -1) itself; give exactly one of the two.
        model, interval, device, update_buffers, ema_dtype: see :class:`BaseAveragedModel`.
    """

    def __init__(self, model: nn.Module, sigma_rel: Optional[float] = None,
                 gamma: Optional[float] = None, interval: int = 1,
                 device: Optional[torch.device] = None, update_buffers: bool = False, *,
                 ema_dtype=None) -> None:
        gamma = _check_power(sigma_rel, gamma)
        super().__init__(model, interval, device, update_buffers, ema_dtype=ema_dtype)
        self.gamma = gamma
        self.sigma_rel = power_sigma_rel(gamma)

    def weight_args(self) -> dict:
        return dict(gamma=self.gamma)

    def avg_func(self, averaged_param: Tensor, source_param: Tensor, steps: Tensor) -> None:
        weight = averaging_weight('power', int(steps), gamma=self.gamma, interval=self.interval)
        ema_update_ref([averaged_param], [source_param], weight)


# The fork in update_parameters: a class whose avg_func is one of these runs the fused plan with
# that rule (minimm.ops.averaging_weight); any other avg_func runs MMEngine's loop.
def plan_rule(averaged: BaseAveragedModel) -> Optional[str]:
    """The plan rule of ``averaged``'s ``avg_func``; None for one the plan cannot run."""
    return PLAN_RULES.get(type(averaged).avg_func)


PLAN_RULES = {
    ExponentialMovingAverage.avg_func: 'ema',
    MomentumAnnealingEMA.avg_func: 'anneal',
    StochasticWeightAverage.avg_func: 'swa',
    PowerFunctionEMA.avg_func: 'power',
}


def plan_record(averaged, model: nn.Module) -> AveragingRecord:
    """The record the fast path builds a plan from: ``model``'s averaged entries and buffers and,
    for each of the averaged models ``averaged`` (all built from ``model``), its own tensors in
    the same order, its rule and numbers and its counter."""
    first = averaged[0]
    owner = type(first).__name__
    rules = [plan_rule(avg) for avg in averaged]
    if None in rules:
        return AveragingRecord(owner, loop_reason=f'{owner} overrides avg_func')
    names = list(first.avg_parameters)
    src = first._source_entries(model, names)
    targets = []
    for avg, rule in zip(averaged, rules):
        entries = avg.avg_parameters
        mirrored = [] if avg.update_buffers else list(avg.module.buffers())
        targets.append(EMATarget(_shards([entries[name] for name in names]), _shards(mirrored),
                                 rule, interval=avg.interval, **avg.weight_args()))
    return AveragingRecord(owner, _shards([src[name] for name in names]),
                           _shards([] if first.update_buffers else list(model.buffers())), targets,
                           [avg.steps for avg in averaged], [avg._host_steps for avg in averaged])



def _shards(tensors):
    """Each tensor, or this rank's shard of it when it is a DTensor (a sharded model's
    parameter, whose averaged copy is a DTensor with the same placements): the plan updates the
    local shards, with no gather."""
    return [t.to_local() if is_dtensor(t) else t for t in tensors]
