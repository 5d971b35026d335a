"""The averaged models' fast path: a whole ``update_parameters`` step as one :class:`EMAPlan` call.

``BaseAveragedModel.update_parameters`` (minimm/model/averaged_model.py) is MMEngine's loop over
the averaged entries. Before the loop it calls :meth:`FusedAveraging.step`, which runs the step
as one plan call and returns True when the class's rule is one the plan knows, or returns False
(and the loop runs) for a custom ``avg_func`` or tensors on another device than the counter.
Everything here is that plan's bookkeeping, out of the learner's way:

* **Following replaced tensors.** MMEngine's loop reads ``named_parameters()`` /
  ``state_dict()`` at every update; the plan reads them only when something may have changed: a
  tensor or module assigned to a module attribute anywhere in the process (``bn.running_mean =
  t``, as PreciseBN hooks do; ``register_buffer``; ``load_state_dict(assign=True)``), counted by
  torch's global registration hooks; another source model (held by a weak reference, so the plan
  never keeps a model alive); a conversion of the averaged model (``ema.to()``, ``ema.half()``,
  which calls :meth:`FusedAveraging.forget`). Then both models' entries are read again and the
  plan is rebuilt, or refreshed (:meth:`EMAPlan.refresh`) when they are the same tensors. Not
  seen: ``param.data = x`` alone, a tensor put into ``module._buffers`` directly, and a
  conversion of the *source* model alone (build the averaged model after moving the model).
* **Several averaged models of one source** (PostHocEMAHook's power-function EMAs) share one
  plan: each source element is read once for all of them.
* **The stall check** (:mod:`minimm.ops.ema_stall`) on a few calls of an EMA with a momentum.
"""
import operator
import warnings
import weakref
from typing import Optional, Sequence

from torch import nn

from .ema import EMAPlan, EMATarget
from .ema_stall import StallCheck
from .loader import backend_info

# The backend the plans are built on (EMAPlan's backend=): None picks the native kernels when
# they are available for the tensors' device; the tests set 'ref' or 'native' to compare them.
PLAN_BACKEND: Optional[str] = None

# How many tensors and modules have been assigned to module attributes in this process, counted
# from the first averaged model on: a plan built at another count re-reads the models' entries.
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


def _same_tensors(lists_a, lists_b) -> bool:
    """Whether two groups of tensor lists hold the same objects, in the same order."""
    return len(lists_a) == len(lists_b) and all(
        len(a) == len(b) and all(map(operator.is_, a, b)) for a, b in zip(lists_a, lists_b))


class FusedAveraging:
    """The plan of one or more averaged models (all built from one source model) and the state
    it needs to follow them. The methods' ``rule`` is the plan rule of the models' ``avg_func``
    (see :func:`minimm.ops.averaging_weight`), None for one the plan cannot run."""

    def __init__(self) -> None:
        self.plan: Optional[EMAPlan] = None
        self.loop_reason: Optional[str] = None
        self._source = None
        self._inputs = None
        self._count = -1
        self._captured_plan: Optional[EMAPlan] = None  # see forget()
        self._stall = StallCheck()
        _watch_assignments()

    def __getstate__(self):
        # The plan holds native objects and a weak reference: copies and pickles drop them, and
        # the next step builds a new plan.
        state = self.__dict__.copy()
        state['plan'] = state['_source'] = state['_inputs'] = state['_captured_plan'] = None
        return state

    def forget(self, owner: str) -> None:
        """Drop the plan (the averaged models' tensors were replaced: ``.to()``, ``.half()``...).
        One whose step a CUDA graph captured holds the memory the graph replays, so it is kept
        (the last one only) and a warning says to capture again."""
        if self.plan is not None and self.plan.captured:
            warnings.warn(f'{owner}: its tensors changed after its update was captured in a CUDA '
                          'graph; that graph still updates the old tensors, so capture it again',
                          stacklevel=3)
            self._captured_plan = self.plan
        self.plan = None

    def step(self, averaged: Sequence[nn.Module], model: nn.Module, rule: Optional[str]) -> bool:
        """One ``update_parameters`` step of every model in ``averaged`` from ``model`` as one plan
        call; False (nothing done) when the per-entry loop must run instead."""
        momentum = getattr(averaged[0], 'momentum', None)
        if momentum is not None and self._stall.due():
            entries = averaged[0].avg_parameters
            src = averaged[0]._source_entries(model, entries)
            self._stall.look(type(averaged[0]).__name__, list(entries.values()),
                             [src[n] for n in entries], momentum)
        plan = self.plan
        if plan is None or self._source() is not model or self._count != _assignments:
            plan = self.plan_for(averaged, model, rule)
            if plan is None:
                return False
        # Each model's host copy of its counter (minimm/model/host_count.py): the fallback then
        # decides without reading the device.
        counts = [a._host_steps.get(a.steps) for a in averaged]
        if len(averaged) > 1:
            plan.step([a.steps for a in averaged], counts)
        else:
            plan.step(averaged[0].steps, counts[0])
        for a in averaged:
            a._host_steps.incremented(a.steps)
        return True

    def plan_for(self, averaged: Sequence[nn.Module], model: nn.Module,
                 rule: Optional[str]) -> Optional[EMAPlan]:
        """The plan averaging ``model``'s current entries into each averaged model's; the current
        plan when they are the same tensors, else a new one. None (``loop_reason`` says why) when
        the loop must run instead."""
        owner = type(averaged[0]).__name__
        if rule is None:
            self.forget(owner)
            self.loop_reason = f'{owner} overrides avg_func'
            return None
        first = averaged[0]
        names = list(first.avg_parameters)
        src = first._source_entries(model, names)
        source = [src[name] for name in names]
        mirror_src = [] if first.update_buffers else list(model.buffers())
        targets = []
        for avg in averaged:
            entries = avg.avg_parameters
            targets.append(EMATarget([entries[name] for name in names],
                                     [] if avg.update_buffers else list(avg.module.buffers()),
                                     rule, getattr(avg, 'momentum', 0.0),
                                     float(getattr(avg, 'gamma', 100.0)), avg.interval))
        copies = [t for target in targets for t in target.ema + target.mirror_ema]
        tensors = source + mirror_src + copies
        counter = first.steps.device
        devices = {str(t.device) for t in tensors + [a.steps for a in averaged]} - {str(counter)}
        if devices:
            self.forget(owner)
            self.loop_reason = (f'tensors on {sorted(devices)} and the averaged copy\'s counter '
                                f'on {counter}')
            return None
        inputs = [source, mirror_src] + [t for target in targets
                                         for t in (target.ema, target.mirror_ema)]
        same = self.plan is not None and self._source() is model
        if not (same and _same_tensors(self._inputs, inputs)):
            self._inputs = inputs
            self.forget(owner)
            self.plan = EMAPlan.joint(targets, source, mirror_src, backend=PLAN_BACKEND)
            self._source = weakref.ref(model)
        else:
            self.plan.refresh()
        self._count = _assignments
        self.loop_reason = None
        return self.plan

    @property
    def backend(self) -> Optional[str]:
        """``'native'``, ``'ref'`` (the plan's fallback), ``'loop'``, or None before a step."""
        if self.plan is not None:
            return self.plan.backend
        return 'loop' if self.loop_reason else None

    def describe(self, averaged: Sequence[nn.Module], model: nn.Module, rule: Optional[str]) -> str:
        """One line saying how a step runs, e.g. ``fused native plan on cuda:0, 161 tensors
        (25.6 M values)``, or why the loop runs."""
        plan = self.plan_for(averaged, model, rule)
        if plan is None:
            return f'per-tensor loop ({self.loop_reason})'
        values = sum(t.numel() for t in plan.ema + plan.mirror_ema)
        where = f'on {plan.device}, {len(plan.ema)} tensors ({values / 1e6:.1f} M values)'
        if len(averaged) > 1:
            where += f', {len(averaged)} averaged copies in one pass'
        if plan.backend == 'native':
            return f'fused native plan {where}'
        info = backend_info().get(plan.device.type,
                                  {'backend': 'fallback', 'reason': 'no native kernels for it'})
        reason = "backend='ref' was asked for" if info['backend'] == 'native' else info['reason']
        return f'PyTorch plan (torch._foreach_*) {where}; native kernels not used: {reason}'
