"""The averaged models' fast path: a whole ``update_parameters`` step as one :class:`EMAPlan` call.

``BaseAveragedModel.update_parameters`` (minimm/model/averaged_model.py) is MMEngine's loop over
the averaged entries. Before the loop it calls :meth:`FusedAveraging.step`, which runs the step
as one plan call and returns True, or returns False (and the loop runs) for a custom
``avg_func`` or tensors on another device than the counter.

The seam is one record each way. The model layer describes what a plan needs in an
:class:`AveragingRecord` (the tensors, each copy's rule and numbers, its counter and the host
copy of that counter), handed over by a callable that this module calls only when a plan is
built or rebuilt; this module reads no attribute of the models. Everything here is that plan's
bookkeeping, out of the learner's way:

* **Following replaced tensors.** MMEngine's loop reads ``named_parameters()`` /
  ``state_dict()`` at every update; the plan asks for a new record only when something may have
  changed: a tensor or module assigned to a module attribute anywhere in the process
  (``bn.running_mean = t``, as PreciseBN hooks do; ``register_buffer``;
  ``load_state_dict(assign=True)``), counted by torch's global registration hooks; another source
  model (held by a weak reference, so the plan never keeps a model alive); a conversion of the
  averaged model (``ema.to()``, ``ema.half()``, after which the model layer calls
  :meth:`FusedAveraging.forget`). The new record's tensors are compared with the plan's, object
  *and* data pointer (a storage freed and allocated again under the same tensor, as FSDP does,
  moves it): all the same, the plan is kept; the same objects moved, it is refreshed
  (:meth:`EMAPlan.refresh`); other objects, it is rebuilt. Not seen: ``param.data = x`` alone, a
  tensor put into ``module._buffers`` directly, and a conversion of the *source* model alone
  (build the averaged model after moving the model).
* **Several averaged models of one source** (PostHocEMAHook's power-function EMAs) share one
  plan: each source element is read once for all of them.
* **The stall check** (:mod:`minimm.ops.ema_stall`) on a few calls, with the weight the rule
  gives at that call (an annealed EMA's first weights are near 1, not its momentum).
"""
import operator
import warnings
import weakref
from typing import Callable, List, NamedTuple, Optional, Sequence

from torch import Tensor, nn

from .ema import EMAPlan, EMATarget, averaging_weight
from .ema_stall import StallCheck
from .loader import backend_info

# The backend the plans are built on (EMAPlan's backend=): None picks the native kernels when
# they are available for the tensors' device; the tests set 'ref' or 'native' to compare them.
PLAN_BACKEND: Optional[str] = None

# How many tensors and modules have been assigned to module attributes in this process, counted
# from the first averaged model on: a plan built at another count asks for a new record.
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


class AveragingRecord(NamedTuple):
    """What a plan needs from one or more averaged models of one source, as the model layer
    hands it over.

    Attributes:
        owner: the averaged models' class name, for messages.
        source, mirror_source: the source model's averaged entries, and the buffers mirrored on
            every call (empty with ``update_buffers=True``), in the plan's order.
        targets: one :class:`EMATarget` per averaged copy (its tensors in that order, its rule,
            momentum, gamma and interval).
        counters: each copy's int64 call counter (MMEngine's ``steps``), on its device.
        counts: each counter's host copy: ``get(counter)`` gives its value without a device
            read, ``incremented(counter)`` notes one more call.
        loop_reason: set when the per-entry loop must run instead (the other fields are then
            empty), e.g. a custom ``avg_func``.
    """
    owner: str
    source: Sequence[Tensor] = ()
    mirror_source: Sequence[Tensor] = ()
    targets: Sequence[EMATarget] = ()
    counters: Sequence[Tensor] = ()
    counts: Sequence = ()
    loop_reason: Optional[str] = None

    def tensors(self) -> List[Tensor]:
        """Every tensor the plan reads or writes, in one fixed order."""
        return list(self.source) + list(self.mirror_source) + [
            t for target in self.targets for t in list(target.ema) + list(target.mirror_ema)]


def _same_objects(a: Sequence[Tensor], b: Sequence[Tensor]) -> bool:
    return len(a) == len(b) and all(map(operator.is_, a, b))


class FusedAveraging:
    """The plan of one or more averaged models (all built from one source model) and the state
    it needs to follow them. ``request(model)`` returns the models' :class:`AveragingRecord`; it
    is called only when a plan is built or rebuilt."""

    def __init__(self) -> None:
        self.plan: Optional[EMAPlan] = None
        self.loop_reason: Optional[str] = None
        self._record: Optional[AveragingRecord] = None
        self._source = None
        self._where = None
        self._count = -1
        self._captured_plan: Optional[EMAPlan] = None  # see forget()
        self._stall = StallCheck()
        _watch_assignments()

    def __getstate__(self):
        # The plan holds native objects, tensors and a weak reference: copies and pickles drop
        # them, and the next step asks for a new record and builds a new plan.
        state = self.__dict__.copy()
        for key in ('plan', '_record', '_source', '_where', '_captured_plan'):
            state[key] = None
        return state

    def forget(self, owner: str) -> None:
        """Drop the plan and the record (the averaged models' tensors were replaced: ``.to()``,
        ``.half()``...). One whose step a CUDA graph captured holds the memory the graph
        replays, so it is kept (the last one only) and a warning says to capture again."""
        if self.plan is not None and self.plan.captured:
            warnings.warn(f'{owner}: its tensors changed after its update was captured in a CUDA '
                          'graph; that graph still updates the old tensors, so capture it again',
                          stacklevel=3)
            self._captured_plan = self.plan
        self.plan = self._record = None

    def step(self, model: nn.Module, request: Callable[[nn.Module], AveragingRecord]) -> bool:
        """One ``update_parameters`` step of the averaged models from ``model`` as one plan
        call; False (nothing done) when the per-entry loop must run instead."""
        record = self._record
        if record is None or self._source() is not model or self._count != _assignments:
            record = self._take(request(model), model)
        if record.loop_reason is None and self._stall.due():
            self._look_for_stall(record)
        plan = self.plan
        if plan is None:
            return False
        # Each copy's host count (minimm/model/host_count.py): the fallback then decides
        # without reading the device.
        counts = [c.get(t) for c, t in zip(record.counts, record.counters)]
        if len(counts) > 1:
            plan.step(record.counters, counts)
        else:
            plan.step(record.counters[0], counts[0])
        for c, t in zip(record.counts, record.counters):
            c.incremented(t)
        return True

    def _look_for_stall(self, record: AveragingRecord) -> None:
        target, counter = record.targets[0], record.counters[0]
        count = record.counts[0].get(counter)
        if count == 0:  # the first call copies: nothing to judge yet
            return
        weight = averaging_weight(target.rule, count, target.momentum, target.gamma,
                                  target.interval)
        self._stall.look(record.owner, list(target.ema), list(record.source), weight)

    def _take(self, record: AveragingRecord, model: nn.Module) -> AveragingRecord:
        """Keep ``record`` and make the plan fit it: kept, refreshed, rebuilt, or dropped (the
        loop runs; ``loop_reason`` says why)."""
        previous = self._record
        self.loop_reason = record.loop_reason
        if self.loop_reason is None:
            counter = record.counters[0].device
            devices = {str(t.device) for t in record.tensors() + list(record.counters)}
            devices.discard(str(counter))
            if devices:
                self.loop_reason = (f'tensors on {sorted(devices)} and the averaged copy\'s '
                                    f'counter on {counter}')
        if self.loop_reason is not None:
            self.forget(record.owner)
        else:
            tensors = record.tensors()
            where = [(t.data_ptr(), t.dtype, t.shape, t.stride()) for t in tensors]
            if (self.plan is None or previous is None
                    or not _same_objects(previous.tensors(), tensors)):
                self.forget(record.owner)
                self.plan = EMAPlan.joint(record.targets, record.source, record.mirror_source,
                                          backend=PLAN_BACKEND)
            elif where != self._where:
                self.plan.refresh()  # the same tensors, one of them moved
            self._where = where
        self._record, self._source, self._count = record, weakref.ref(model), _assignments
        return record

    @property
    def backend(self) -> Optional[str]:
        """``'native'``, ``'ref'`` (the plan's fallback), ``'loop'``, or None before a step."""
        if self.plan is not None:
            return self.plan.backend
        return 'loop' if self.loop_reason else None

    def describe(self, model: nn.Module, request: Callable[[nn.Module], AveragingRecord]) -> str:
        """One line saying how a step runs, e.g. ``fused native plan on cuda:0, 161 tensors
        (25.6 M values)``, or why the loop runs."""
        record = self._take(request(model), model)
        plan = self.plan
        if plan is None:
            return f'per-tensor loop ({self.loop_reason})'
        values = sum(t.numel() for t in plan.ema + plan.mirror_ema)
        where = f'on {plan.device}, {len(plan.ema)} tensors ({values / 1e6:.1f} M values)'
        if len(record.targets) > 1:
            where += f', {len(record.targets)} averaged copies in one pass'
        if plan.backend == 'native':
            return f'fused native plan {where}'
        info = backend_info().get(plan.device.type,
                                  {'backend': 'fallback', 'reason': 'no native kernels for it'})
        reason = "backend='ref' was asked for" if info['backend'] == 'native' else info['reason']
        return f'PyTorch plan (torch._foreach_*) {where}; native kernels not used: {reason}'
