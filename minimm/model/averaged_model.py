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

* ``update_parameters`` is MMEngine's per-tensor loop calling ``avg_func``, with one fork before
  it: when the class's ``avg_func`` is one of the three built-in ones (``PLAN_RULES``), the whole
  step runs as one :class:`minimm.ops.EMAPlan` call instead (native C++/CUDA when available, else
  its PyTorch fallback, which is MMEngine's ``lerp_``). A subclass that overrides ``avg_func``
  gets the loop, so custom rules keep working. :attr:`backend` and :meth:`describe` say which
  path runs (EMAHook logs it).
* The plan follows the models as MMEngine's loop does, which reads ``named_parameters()`` /
  ``state_dict()`` at every update, without reading them at every update: a tensor or module
  assigned to a module attribute anywhere in the process (``bn.running_mean = t``, as PreciseBN
  hooks do; ``register_buffer``; ``load_state_dict(assign=True)``) is counted by torch's global
  registration hooks, and the next update then re-reads both models' entries and refreshes the
  plan (:meth:`minimm.ops.EMAPlan.refresh`); so does a conversion of the averaged model
  (``ema.to()``, ``ema.half()``). Not seen until one of those happens: ``param.data = x`` alone, a
  tensor put into ``module._buffers`` directly, and a conversion of the *source* model alone
  (build the averaged model after moving the model, as EMAHook does in ``before_run``).
* A tensor with two names (tied weights, listed twice by ``state_dict()``) is averaged once;
  MMEngine averages it once per name.
* Integer buffers (BatchNorm's ``num_batches_tracked``) with ``update_buffers=True`` are *copied*
  on every averaging call; MMEngine copies them on the first call and then silently freezes them.
* The native kernels compute ``avg + m * (src - avg)`` with three roundings instead of ``lerp_``:
  equal to MMEngine up to a few units in the last place of each update (see minimm/ops/ema.py).
* ``ema_dtype`` (keyword only, a minimm addition): keep the averaged copy's floating tensors in
  another dtype than the model's, e.g. fp32 for a model trained in bf16, whose own-dtype EMA stops
  moving (minimm/model/ema_stall.py, which also warns when that happens). The kernels average a
  bf16 source into an fp32 copy in one pass; ``EMAHook`` casts back for validation and checkpoints.

Left out: nothing of the public API; the averaged copy is kept as ordinary tensors (no flat
buffer), so ``load_state_dict`` copies into them in place as usual.
"""
import itertools
import numbers
import operator
import warnings
import weakref
from copy import deepcopy
from typing import Dict, Optional

import torch
from torch import Tensor, nn

from minimm.ops import EMAPlan, averaging_weight, backend_info, ema_update_ref
from minimm.ops.aliases import first_names
from minimm.registry import MODELS
from .ema_stall import StallCheck
from .host_count import HostCount

DEFAULT_MOMENTUM = 0.0002
EMA_DTYPES = ('float16', 'bfloat16', 'float32', 'float64')

# How many tensors and modules have been assigned to module attributes in this process (torch's
# global registration hooks count them, from the first averaged model on): a plan built at another
# count re-reads the models' entries before its next step.
_assignments = 0
_assignment_hooks = []


def _count_assignment(module: nn.Module, name: str, value) -> None:
    global _assignments
    _assignments += 1


def _watch_assignments() -> None:
    if not _assignment_hooks:
        from torch.nn.modules import module as module_hooks
        _assignment_hooks.extend(register(_count_assignment) for register in (
            module_hooks.register_module_parameter_registration_hook,
            module_hooks.register_module_buffer_registration_hook,
            module_hooks.register_module_module_registration_hook))


class BaseAveragedModel(nn.Module):
    """The shared bookkeeping of the averaged models; subclasses define :meth:`avg_func`.

    Args:
        model: the model to average; deep-copied into ``self.module``.
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
        self.module = deepcopy(model).requires_grad_(False)
        self.interval = interval
        self.ema_dtype = _parse_ema_dtype(ema_dtype)
        if device is not None:
            self.module = self.module.to(device)
        if self.ema_dtype is not None:  # floating parameters and buffers only; the counter stays int64
            self.module = self.module.to(self.ema_dtype)
        # The counter sits with the averaged copy, which a plan step updates on its device.
        first = next(itertools.chain(self.module.parameters(), self.module.buffers()), None)
        device = first.device if first is not None else device
        self.register_buffer('steps', torch.tensor(0, dtype=torch.long, device=device))
        self.update_buffers = update_buffers
        self._plan: Optional[EMAPlan] = None
        self._captured_plan: Optional[EMAPlan] = None
        self._plan_source = None
        self._plan_inputs = None
        self._plan_count = -1
        self._loop_reason: Optional[str] = None
        self._stall = StallCheck()
        self._host_steps = HostCount(self.steps, 0)  # the plan's fallback and the loop read it
        _watch_assignments()

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
        state['_plan'] = state['_plan_source'] = state['_plan_inputs'] = None
        state['_captured_plan'] = None
        return state

    def _apply(self, fn, *args, **kwargs):
        # .to(), .half(), .cuda()... replace the module's tensors (buffers as whole objects): the
        # plan is rebuilt on the next update.
        self._drop_plan()
        return super()._apply(fn, *args, **kwargs)

    def _drop_plan(self) -> None:
        """Forget the plan. One whose step a CUDA graph captured holds the memory the graph
        replays, so it is kept (the last one only) and a warning says to capture again."""
        if self._plan is not None and self._plan.captured:
            warnings.warn(f'{type(self).__name__}: its tensors changed after its update was '
                          'captured in a CUDA graph; that graph still updates the old tensors, so '
                          'capture it again', stacklevel=3)
            self._captured_plan = self._plan
        self._plan = None

    def _source_entries(self, model: nn.Module, names) -> Dict[str, Tensor]:
        src = self._averaged_entries(model)
        missing = [name for name in names if name not in src]
        if missing:
            raise ValueError(f'update_parameters: the model has no {missing[:3]} (it is not the model this '
                             f'{type(self).__name__} was built from)')
        return src

    @torch.no_grad()
    def update_parameters(self, model: nn.Module) -> None:
        """One averaging step from ``model`` (see the module docstring for what each call does)."""
        momentum = getattr(self, 'momentum', None)
        if momentum is not None and self._stall.due():
            averaged = self.avg_parameters
            src = self._source_entries(model, averaged)
            self._stall.look(type(self).__name__, list(averaged.values()), [src[n] for n in averaged], momentum)
        rule = PLAN_RULES.get(type(self).avg_func)
        if rule is not None and self._plan_step(model, rule):
            return
        if rule is None:
            self._loop_reason = f'{type(self).__name__} overrides avg_func'
        # MMEngine's loop, for a custom avg_func and for averaged copies on another device.
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

    def _plan_step(self, model: nn.Module, rule: str) -> bool:
        """One step of the plan for ``model``; False when the loop must run instead. The models'
        entries are read again (and the plan rebuilt or refreshed) for another model, after a
        conversion of the averaged model, and when tensors or modules were assigned to module
        attributes since the last look: the step itself does no per-tensor work."""
        plan = self._plan
        if plan is None or self._plan_source() is not model or self._plan_count != _assignments:
            plan = self._plan_for(model, rule)
            if plan is None:
                return False
        plan.step(self.steps, self._host_steps.get(self.steps))
        self._host_steps.incremented(self.steps)
        return True

    def _plan_for(self, model: nn.Module, rule: str) -> Optional[EMAPlan]:
        """The plan averaging ``model``'s current entries into ``self.module``'s; the current
        plan when they are the same tensors, else a new one. None (with ``_loop_reason`` set)
        when the loop must run instead."""
        averaged = self.avg_parameters
        src = self._source_entries(model, averaged)
        ema, source = list(averaged.values()), [src[name] for name in averaged]
        mirror_ema = [] if self.update_buffers else list(self.module.buffers())
        mirror_src = [] if self.update_buffers else list(model.buffers())
        devices = {str(t.device) for t in source + mirror_src + ema + mirror_ema} - {str(self.steps.device)}
        if devices:
            self._drop_plan()
            self._loop_reason = (f'tensors on {sorted(devices)} and the averaged copy\'s '
                                 f'counter on {self.steps.device}')
            return None
        inputs = (ema, source, mirror_ema, mirror_src)
        if self._plan is None or self._plan_source() is not model or not _same_tensors(self._plan_inputs, inputs):
            self._plan_inputs = inputs
            self._drop_plan()
            self._plan = EMAPlan(ema, source, mirror_ema, mirror_src, rule=rule, momentum=getattr(self, 'momentum', 0.0),
                                 gamma=float(getattr(self, 'gamma', 100.0)), interval=self.interval)
            self._plan_source = weakref.ref(model)
        else:
            self._plan.refresh()
        self._plan_count = _assignments
        self._loop_reason = None
        return self._plan

    @property
    def backend(self) -> Optional[str]:
        """How the last update ran (or :meth:`describe` would run one): ``'native'`` (the fused
        C++/CUDA plan), ``'ref'`` (the plan's PyTorch fallback), ``'loop'`` (MMEngine's per-tensor
        loop); None before either was called."""
        if self._plan is not None:
            return self._plan.backend
        return 'loop' if self._loop_reason else None

    def describe(self, model: nn.Module) -> str:
        """One line saying how :meth:`update_parameters` averages ``model``, e.g.
        ``fused native plan on cuda:0, 161 tensors (25.6 M values)``, or why it falls back."""
        rule = PLAN_RULES.get(type(self).avg_func)
        if rule is None:
            self._loop_reason = f'{type(self).__name__} overrides avg_func'
        plan = None if rule is None else self._plan_for(model, rule)
        if plan is None:
            return f'per-tensor loop ({self._loop_reason})'
        values = sum(t.numel() for t in plan.ema + plan.mirror_ema)
        where = f'on {plan.device}, {len(plan.ema)} tensors ({values / 1e6:.1f} M values)'
        if plan.backend == 'native':
            return f'fused native plan {where}'
        info = backend_info().get(plan.device.type, {'backend': 'fallback', 'reason': 'no native kernels for it'})
        reason = "backend='ref' was asked for" if info['backend'] == 'native' else info['reason']
        return f'PyTorch plan (torch._foreach_*) {where}; native kernels not used: {reason}'


def _same_tensors(lists_a, lists_b) -> bool:
    """Whether two groups of tensor lists hold the same objects, in the same order."""
    return all(len(a) == len(b) and all(map(operator.is_, a, b)) for a, b in zip(lists_a, lists_b))


def _parse_ema_dtype(ema_dtype) -> Optional[torch.dtype]:
    """None, a floating torch dtype, or its name (``'float32'``, ``'torch.float32'``) as a dtype."""
    if ema_dtype is None:
        return None
    name = str(ema_dtype).replace('torch.', '')
    if name not in EMA_DTYPES:
        raise ValueError(f'ema_dtype must be one of {list(EMA_DTYPES)} (or the torch dtype), got {ema_dtype!r}')
    return getattr(torch, name)


def _check_momentum(momentum: Optional[float], decay: Optional[float]) -> float:
    for name, value in (('momentum', momentum), ('decay', decay)):
        # A string from a config ('0.01') would otherwise fail inside the range check below.
        if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
            raise TypeError(f'EMA {name}={value!r} is a {type(value).__name__}: it must be a number in (0, 1)')
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
        ema_dtype: see :class:`BaseAveragedModel`.
    """

    def __init__(self, model: nn.Module, momentum: Optional[float] = None, interval: int = 1,
                 device: Optional[torch.device] = None, update_buffers: bool = False, *,
                 decay: Optional[float] = None, ema_dtype=None) -> None:
        momentum = _check_momentum(momentum, decay)
        super().__init__(model, interval, device, update_buffers, ema_dtype=ema_dtype)
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

    def __init__(self, model: nn.Module, momentum: Optional[float] = None, gamma: int = 100, interval: int = 1,
                 device: Optional[torch.device] = None, update_buffers: bool = False, *,
                 decay: Optional[float] = None, ema_dtype=None) -> None:
        if not gamma > 0:
            raise ValueError(f'gamma must be > 0, got {gamma}')
        super().__init__(model, momentum, interval, device, update_buffers, decay=decay, ema_dtype=ema_dtype)
        self.gamma = gamma

    def avg_func(self, averaged_param: Tensor, source_param: Tensor, steps: Tensor) -> None:
        weight = averaging_weight('anneal', int(steps), self.momentum, self.gamma)
        ema_update_ref([averaged_param], [source_param], weight)


@MODELS.register_module()
class StochasticWeightAverage(BaseAveragedModel):
    """The running arithmetic mean of the weights seen at the averaging calls:
    ``avg += (src - avg) / (steps // interval + 1)``; with inputs 1, 2, 3, 6 it gives 1, 1.5, 2, 3."""

    def avg_func(self, averaged_param: Tensor, source_param: Tensor, steps: Tensor) -> None:
        weight = averaging_weight('swa', int(steps), interval=self.interval)
        ema_update_ref([averaged_param], [source_param], weight)


# The fork in update_parameters: a class whose avg_func is one of these runs the fused plan with
# that rule (minimm.ops.averaging_weight); any other avg_func runs MMEngine's loop.
PLAN_RULES = {
    ExponentialMovingAverage.avg_func: 'ema',
    MomentumAnnealingEMA.avg_func: 'anneal',
    StochasticWeightAverage.avg_func: 'swa',
}
