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
from typing import List, Optional, Sequence, Union

from ...param_groups import format_param
from ...registry import PARAM_SCHEDULERS
from .formulas import ANNEAL_FUNCS, check_anneal_strategy, one_cycle_phase, one_cycle_phase_ends
from .param_scheduler import INF, OptimizerType, _ParamScheduler


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
        check_anneal_strategy(anneal_strategy)
        self.eta_max = eta_max
        self.total_steps = total_steps
        self.div_factor = div_factor
        self.final_div_factor = final_div_factor
        self.anneal_strategy = anneal_strategy
        self._schedule_phases = self._make_phases(pct_start, total_steps, three_phase)

        if last_step == -1:
            max_values = format_param('eta_max', optimizer, eta_max)
            for group, max_value in zip(optimizer.param_groups, max_values):
                group['initial_lr'] = max_value / div_factor
                group['max_lr'] = max_value
                group['min_lr'] = group['initial_lr'] / final_div_factor
        super().__init__(optimizer, param_name, begin, end, last_step, by_epoch, verbose)

    @staticmethod
    def _make_phases(pct_start: float, total_steps: int, three_phase: bool) -> List[dict]:
        """Each phase: the step it ends at and the group keys it anneals from and to."""
        keys = [('initial_lr', 'max_lr'), ('max_lr', 'min_lr')]
        if three_phase:
            keys = [('initial_lr', 'max_lr'), ('max_lr', 'initial_lr'), ('initial_lr', 'min_lr')]
        ends = one_cycle_phase_ends(pct_start, total_steps, three_phase)
        return [dict(end_step=end, start_lr=start_key, end_lr=end_key)
                for end, (start_key, end_key) in zip(ends, keys)]

    def _get_value(self):
        step_num = self.last_step
        if step_num > self.total_steps:
            raise ValueError(f'Tried to step {step_num + 1} times. '
                             f'The specified number of total steps is {self.total_steps}')
        anneal = ANNEAL_FUNCS[self.anneal_strategy]
        idx, pct = one_cycle_phase(step_num, [p['end_step'] for p in self._schedule_phases])
        phase = self._schedule_phases[idx]
        return [anneal(group[phase['start_lr']], group[phase['end_lr']], pct)
                for group in self.optimizer.param_groups]
