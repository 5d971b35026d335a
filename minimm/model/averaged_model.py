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

* The step is not a Python loop over tensors: the built-in rules run as one
  :class:`minimm.ops.EMAPlan` call (native C++/CUDA when available, else its PyTorch twin,
  with bit-identical results). A subclass that overrides ``avg_func`` gets MMEngine's per-tensor
  loop instead, so custom rules keep working. :attr:`backend` and :meth:`describe` say which
  path runs (EMAHook logs it).
* A tensor with two names (tied weights, listed twice by ``state_dict()``) is averaged once;
  MMEngine averages it once per name.
* Integer buffers (BatchNorm's ``num_batches_tracked``) with ``update_buffers=True`` are *copied*
  on every averaging call; MMEngine copies them on the first call and then silently freezes them.
* The arithmetic is ``avg + m * (src - avg)`` with three roundings instead of ``lerp_``: equal to
  MMEngine up to the last bit of each update.

Left out: nothing of the public API; the averaged copy is kept as ordinary tensors (no flat
buffer), so ``load_state_dict`` copies into them in place as usual. The plan follows
``param.data = ...`` on either model and any conversion of the averaged model (``.to()``,
``.half()``); converting the *source* model's buffers after the first update (``model.half()``
replaces buffer objects) is not seen: build the averaged model after moving the model, as
EMAHook does in ``before_run``.
"""
import itertools
import warnings
import weakref
from copy import deepcopy
from typing import Dict, Optional

import torch
from torch import Tensor, nn

from minimm.ops import EMAPlan, averaging_weight, backend_info, ema_update_ref
from minimm.ops.aliases import first_names
from minimm.ops.ema import copy_ref
from minimm.registry import MODELS

DEFAULT_MOMENTUM = 0.0002


class BaseAveragedModel(nn.Module):
    """The shared bookkeeping of the averaged models; subclasses define :meth:`avg_func`.

    Args:
        model: the model to average; deep-copied into ``self.module``.
        interval: average on every ``interval``-th call of :meth:`update_parameters`.
        device: where the averaged copy lives (default: where ``model`` is).
        update_buffers: average the buffers too (else they are mirrored on every call).
    """

    #: The :func:`minimm.ops.averaging_weight` rule that the class's ``avg_func`` implements;
    #: set next to ``avg_func`` so that overriding ``avg_func`` alone turns the plan off.
    plan_rule: Optional[str] = None

    def __init__(self, model: nn.Module, interval: int = 1, device: Optional[torch.device] = None,
                 update_buffers: bool = False) -> None:
        super().__init__()
        if not isinstance(interval, int) or isinstance(interval, bool) or interval < 1:
            raise ValueError(f'interval must be a positive int, got {interval!r}')
        self.module = deepcopy(model).requires_grad_(False)
        self.interval = interval
        if device is not None:
            self.module = self.module.to(device)
        else:  # the counter sits with the averaged copy, which a plan step updates on its device
            device = next(itertools.chain(self.module.parameters(), self.module.buffers()),
                          torch.empty(0)).device
        self.register_buffer('steps', torch.tensor(0, dtype=torch.long, device=device))
        self.update_buffers = update_buffers
        self._plan: Optional[EMAPlan] = None
        self._plan_source = None
        self._loop_reason: Optional[str] = None

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

    def forward(self, *args, **kwargs):
        """Run the averaged copy."""
        return self.module(*args, **kwargs)

    def __getstate__(self):
        # The plan holds native objects and a weak reference to the source model; it is rebuilt
        # on the next update, so copies and pickles of the averaged model simply drop it.
        state = self.__dict__.copy()
        state['_plan'] = state['_plan_source'] = None
        return state

    def _apply(self, fn, *args, **kwargs):
        # .to(), .half(), .cuda()... replace the module's tensors (buffers as whole objects): the
        # plan is rebuilt on the next update.
        self._plan = None
        return super()._apply(fn, *args, **kwargs)

    def _source_entries(self, model: nn.Module, names) -> Dict[str, Tensor]:
        src = self._averaged_entries(model)
        missing = [name for name in names if name not in src]
        if missing:
            raise ValueError(f'update_parameters: the model has no {missing[:3]} (it is not the model this '
                             f'{type(self).__name__} was built from)')
        return src

    def _plan_for(self, model: nn.Module) -> Optional[EMAPlan]:
        """The plan averaging ``model`` into ``self.module``, built on first use and rebuilt for
        another model or after a conversion; None (with ``_loop_reason`` set) when the per-tensor
        loop must run instead."""
        rule = next((cls.__dict__.get('plan_rule') for cls in type(self).__mro__ if 'avg_func' in cls.__dict__),
                    None)
        if rule is None:
            self._loop_reason = f'{type(self).__name__} overrides avg_func'
            return None
        if self._plan is not None and self._plan_source() is model:
            return self._plan
        averaged = self.avg_parameters
        src = self._source_entries(model, averaged)
        ema, source = list(averaged.values()), [src[name] for name in averaged]
        mirror_ema = [] if self.update_buffers else list(self.module.buffers())
        mirror_src = [] if self.update_buffers else list(model.buffers())
        devices = {str(t.device) for t in source + mirror_src + ema + mirror_ema} - {str(self.steps.device)}
        if devices:
            self._plan, self._loop_reason = None, (f'tensors on {sorted(devices)} and the averaged copy\'s '
                                                   f'counter on {self.steps.device}')
            return None
        self._plan = EMAPlan(ema, source, mirror_ema, mirror_src, rule=rule, momentum=getattr(self, 'momentum', 0.0),
                             gamma=float(getattr(self, 'gamma', 100.0)), interval=self.interval)
        self._plan_source = weakref.ref(model)
        self._loop_reason = None
        return self._plan

    @property
    def backend(self) -> Optional[str]:
        """How the last update ran (or :meth:`describe` would run one): ``'native'`` (the fused
        C++/CUDA plan), ``'ref'`` (the plan's PyTorch twin), ``'loop'`` (MMEngine's per-tensor
        loop); None before either was called."""
        if self._plan is not None:
            return self._plan.backend
        return 'loop' if self._loop_reason else None

    def describe(self, model: nn.Module) -> str:
        """One line saying how :meth:`update_parameters` averages ``model``, e.g.
        ``fused native plan on cuda:0, 161 tensors (25.6 M values)``, or why it falls back."""
        plan = self._plan_for(model)
        if plan is None:
            return f'per-tensor loop ({self._loop_reason})'
        values = sum(t.numel() for t in plan.ema + plan.mirror_ema)
        where = f'on {plan.device}, {len(plan.ema)} tensors ({values / 1e6:.1f} M values)'
        if plan.backend == 'native':
            return f'fused native plan {where}'
        info = backend_info().get(plan.device.type, {'backend': 'fallback', 'reason': 'no native kernels for it'})
        reason = "backend='ref' was asked for" if info['backend'] == 'native' else info['reason']
        return f'PyTorch plan (torch._foreach_*) {where}; native kernels not used: {reason}'

    @torch.no_grad()
    def update_parameters(self, model: nn.Module) -> None:
        """One averaging step from ``model`` (see the module docstring for what each call does)."""
        plan = self._plan_for(model)
        if plan is not None:
            plan.step(self.steps)
            return
        # MMEngine's per-tensor loop, for custom avg_func and averaged copies on another device.
        entries = self.avg_parameters
        src = self._source_entries(model, entries)
        steps = int(self.steps)
        for name, averaged in entries.items():
            source = src[name].detach().to(averaged.device)
            if steps == 0 or (steps % self.interval == 0 and not averaged.is_floating_point()):
                copy_ref([averaged], [source])
            elif steps % self.interval == 0:
                self.avg_func(averaged, source, self.steps)
        if not self.update_buffers:
            for averaged, source in zip(self.module.buffers(), model.buffers()):
                averaged.copy_(source.detach().to(averaged.device))
        self.steps += 1


def _check_momentum(momentum: Optional[float], decay: Optional[float]) -> float:
    if momentum is not None and decay is not None:
        raise ValueError(f'give momentum or decay, not both (got momentum={momentum}, decay={decay}); '
                         'MMEngine momentum = 1 - decay')
    if decay is not None:
        if not 0.0 < decay < 1.0:
            raise ValueError(f'decay must be in (0, 1), got {decay}')
        momentum = 1.0 - decay
    elif momentum is None:
        momentum = DEFAULT_MOMENTUM
    if not 0.0 < momentum < 1.0:
        raise ValueError(f'momentum must be in (0, 1), got {momentum}')
    if momentum > 0.5:
        warnings.warn(f'EMA momentum={momentum} is the weight of the *new* value (MMEngine convention), so it is '
                      'usually small, e.g. 0.0002; a value near 1 looks like a timm/torch decay (pass decay= for '
                      'that). Please make sure the value is correct.', stacklevel=3)
    return float(momentum)


@MODELS.register_module()
class ExponentialMovingAverage(BaseAveragedModel):
    """``avg = (1 - momentum) * avg + momentum * src`` on every averaging call.

    Args:
        model, interval, device, update_buffers: see :class:`BaseAveragedModel`.
        momentum: the weight of the new value (default 0.0002).
        decay: timm/torch-style alias, ``momentum = 1 - decay``; give one of the two.
    """

    plan_rule = 'ema'

    def __init__(self, model: nn.Module, momentum: Optional[float] = None, interval: int = 1,
                 device: Optional[torch.device] = None, update_buffers: bool = False, *,
                 decay: Optional[float] = None) -> None:
        momentum = _check_momentum(momentum, decay)
        super().__init__(model, interval, device, update_buffers)
        self.momentum = momentum

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

    plan_rule = 'anneal'

    def __init__(self, model: nn.Module, momentum: Optional[float] = None, gamma: int = 100, interval: int = 1,
                 device: Optional[torch.device] = None, update_buffers: bool = False, *,
                 decay: Optional[float] = None) -> None:
        if not gamma > 0:
            raise ValueError(f'gamma must be > 0, got {gamma}')
        super().__init__(model, momentum, interval, device, update_buffers, decay=decay)
        self.gamma = gamma

    def avg_func(self, averaged_param: Tensor, source_param: Tensor, steps: Tensor) -> None:
        weight = averaging_weight('anneal', int(steps), self.momentum, self.gamma)
        ema_update_ref([averaged_param], [source_param], weight)


@MODELS.register_module()
class StochasticWeightAverage(BaseAveragedModel):
    """The running arithmetic mean of the weights seen at the averaging calls:
    ``avg += (src - avg) / (steps // interval + 1)``; with inputs 1, 2, 3, 6 it gives 1, 1.5, 2, 3."""

    plan_rule = 'swa'

    def avg_func(self, averaged_param: Tensor, source_param: Tensor, steps: Tensor) -> None:
        weight = averaging_weight('swa', int(steps), interval=self.interval)
        ema_update_ref([averaged_param], [source_param], weight)
