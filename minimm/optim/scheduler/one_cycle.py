"""OneCycle: the 1cycle policy (Smith & Topin, "Super-Convergence"), learning rate only.

The lr climbs from ``eta_max / div_factor`` to ``eta_max`` over the first ``pct_start`` of
``total_steps``, then anneals to ``initial / final_div_factor`` (cosine or linear). With
``three_phase=True`` it climbs, comes back down symmetrically to the initial value, and only then
anneals to the minimum. Unlike the other schedulers this one is *not* chainable: each value is
computed from the phase's start and end values, which it stores in the groups as
``initial_lr``, ``max_lr`` and ``min_lr``.

Its ``state_dict()`` holds ``anneal_strategy`` (the string) where MMEngine's holds ``anneal_func``
(the function itself), so the checkpoint loads with ``torch.load(weights_only=True)``.
"""
import math
from typing import List, Optional, Sequence, Union

from ...registry import PARAM_SCHEDULERS
from .mixins import LRSchedulerMixin
from .param_scheduler import INF, OptimizerType, _ParamScheduler


def _annealing_cos(start: float, end: float, pct: float) -> float:
    """Cosine anneal from ``start`` to ``end`` as ``pct`` goes from 0 to 1."""
    cos_out = math.cos(math.pi * pct) + 1
    return end + (start - end) / 2.0 * cos_out


def _annealing_linear(start: float, end: float, pct: float) -> float:
    """Linearly anneal from ``start`` to ``end`` as ``pct`` goes from 0 to 1."""
    return (end - start) * pct + start


ANNEAL_FUNCS = {'cos': _annealing_cos, 'linear': _annealing_linear}


@PARAM_SCHEDULERS.register_module()
class OneCycleParamScheduler(_ParamScheduler):
    """The 1cycle schedule; ``param_name`` must be ``'lr'``.

    Args:
        eta_max: the peak value (one for all groups, or one per group).
        total_steps: steps in the cycle; defaults to ``end - begin``.
        pct_start: fraction of the cycle spent climbing (a float in [0, 1]).
        anneal_strategy: ``'cos'`` or ``'linear'``.
        div_factor: initial value = ``eta_max / div_factor``.
        final_div_factor: minimum value = ``initial / final_div_factor``.
        three_phase: climb, descend back to the initial value, then anneal to the minimum.
    """

    _epoch_args = ('total_steps',)

    def __init__(self, optimizer: OptimizerType, param_name: str,
                 eta_max: Union[float, Sequence[float]] = 0, total_steps: Optional[int] = None,
                 pct_start: float = 0.3, anneal_strategy: str = 'cos', div_factor: float = 25.,
                 final_div_factor: float = 1e4, three_phase: bool = False, begin: int = 0,
                 end: int = INF, last_step: int = -1, by_epoch: bool = True,
                 verbose: bool = False):
        if param_name != 'lr':
            raise ValueError(f'OneCycle only works for the learning rate, but got '
                             f'param_name={param_name!r}')
        if total_steps is None:
            total_steps = end - begin
        elif not isinstance(total_steps, int) or total_steps <= 0:
            raise ValueError(f'Expected positive integer total_steps, but got {total_steps}')
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f'Expected float between 0 and 1 pct_start, but got {pct_start}')
        if anneal_strategy not in ANNEAL_FUNCS:
            raise ValueError('anneal_strategy must be one of "cos" or "linear", '
                             f'instead got {anneal_strategy!r}')
        self.eta_max = eta_max
        self.total_steps = total_steps
        self.div_factor = div_factor
        self.final_div_factor = final_div_factor
        self.anneal_strategy = anneal_strategy
        self._schedule_phases = self._make_phases(pct_start, total_steps, three_phase)

        if last_step == -1:
            max_values = self._format_param(optimizer, eta_max)
            for group, max_value in zip(optimizer.param_groups, max_values):
                group['initial_lr'] = max_value / div_factor
                group['max_lr'] = max_value
                group['min_lr'] = group['initial_lr'] / final_div_factor
        super().__init__(optimizer, param_name, begin=begin, end=end, last_step=last_step,
                         by_epoch=by_epoch, verbose=verbose)

    @staticmethod
    def _make_phases(pct_start: float, total_steps: int, three_phase: bool) -> List[dict]:
        """Each phase: the step it ends at and the group keys it anneals from and to."""
        climb_end = float(pct_start * total_steps) - 1
        if three_phase:
            return [
                dict(end_step=climb_end, start_lr='initial_lr', end_lr='max_lr'),
                dict(end_step=float(2 * pct_start * total_steps) - 2, start_lr='max_lr',
                     end_lr='initial_lr'),
                dict(end_step=total_steps - 1, start_lr='initial_lr', end_lr='min_lr'),
            ]
        return [
            dict(end_step=climb_end, start_lr='initial_lr', end_lr='max_lr'),
            dict(end_step=total_steps - 1, start_lr='max_lr', end_lr='min_lr'),
        ]

    @staticmethod
    def _format_param(optimizer: OptimizerType,
                      param: Union[float, Sequence[float]]) -> List[float]:
        """One value per parameter group."""
        n = len(optimizer.param_groups)
        if isinstance(param, (list, tuple)):
            if len(param) != n:
                raise ValueError(f'expected {n} values for eta_max, got {len(param)}')
            return list(param)
        return [param] * n

    def _get_value(self):
        step_num = self.last_step
        if step_num > self.total_steps:
            raise ValueError(f'Tried to step {step_num + 1} times. '
                             f'The specified number of total steps is {self.total_steps}')
        anneal = ANNEAL_FUNCS[self.anneal_strategy]
        values = []
        for group in self.optimizer.param_groups:
            start_step = 0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase['end_step']
                if step_num <= end_step or i == len(self._schedule_phases) - 1:
                    pct = (step_num - start_step) / (end_step - start_step)
                    values.append(anneal(group[phase['start_lr']], group[phase['end_lr']], pct))
                    break
                start_step = end_step
        return values


@PARAM_SCHEDULERS.register_module()
class OneCycleLR(LRSchedulerMixin, OneCycleParamScheduler):
    """OneCycleParamScheduler on ``lr``."""
