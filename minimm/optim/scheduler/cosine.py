"""Cosine schedules: CosineAnnealing and CosineRestart (their LR and momentum
forms are in ``lr_scheduler.py`` and ``momentum_scheduler.py``).

CosineAnnealing, run alone, with ``t = last_step``:

    v_t = eta_min + (base - eta_min) * (1 + cos(pi * t / T_max)) / 2

``T_max`` defaults to the window length ``end - begin``. The floor is ``eta_min``, or
``base * eta_min_ratio`` when a ratio is given (one of the two, not both). The update is the
chainable recursion v_t = eta_min + (v_{t-1} - eta_min) * (1 + cos(pi t/T)) / (1 + cos(pi (t-1)/T)),
with the SGDR special case at t = (2k+1) T_max where that ratio would divide by zero.

CosineRestart splits the window into ``periods``; each starts again from
``base * restart_weights[i]`` and anneals to the floor over its own period.
"""
import math
from typing import List, Optional, Sequence

from ...registry import PARAM_SCHEDULERS
from .formulas import annealing_target, period_index
from .param_scheduler import INF, OptimizerType, _ParamScheduler


def _cosine_step(value: float, eta_min: float, t: int, period: int) -> float:
    """One chainable cosine step from ``t - 1`` to ``t`` in a period of length ``period``."""
    return ((1 + math.cos(math.pi * t / period)) / (1 + math.cos(math.pi * (t - 1) / period))
            * (value - eta_min) + eta_min)


@PARAM_SCHEDULERS.register_module()
class CosineAnnealingParamScheduler(_ParamScheduler):
    """Anneal the value from its starting value to the floor along half a cosine."""

    _epoch_args = ('T_max',)

    def __init__(self, optimizer: OptimizerType, param_name: str, T_max: Optional[int] = None,
                 eta_min: Optional[float] = None, begin: int = 0, end: int = INF,
                 last_step: int = -1, by_epoch: bool = True, verbose: bool = False,
                 eta_min_ratio: Optional[float] = None):
        if eta_min is None and eta_min_ratio is None:
            eta_min = 0.
        if eta_min is not None and eta_min_ratio is not None:
            raise ValueError('Either `eta_min` or `eta_min_ratio` should be specified, not both')
        self.T_max = T_max or (end - begin)
        self.eta_min = eta_min
        self.eta_min_ratio = eta_min_ratio
        super().__init__(optimizer, param_name, begin, end, last_step, by_epoch, verbose)

    def _get_value(self):
        if self.last_step == 0:
            return self._current_values()
        values = []
        for base_value, value in zip(self.base_values, self._current_values()):
            eta_min = annealing_target(self.eta_min, self.eta_min_ratio, base_value)
            if (self.last_step - 1 - self.T_max) % (2 * self.T_max) == 0:
                # The previous step sat at the bottom (cos = -1): climb by the first step's amount.
                values.append(value + (base_value - eta_min)
                              * (1 - math.cos(math.pi / self.T_max)) / 2)
            else:
                values.append(_cosine_step(value, eta_min, self.last_step, self.T_max))
        return values


@PARAM_SCHEDULERS.register_module()
class CosineRestartParamScheduler(_ParamScheduler):
    """Cosine annealing restarted at the end of each of ``periods``."""

    _epoch_args = ('periods',)

    def __init__(self, optimizer: OptimizerType, param_name: str, periods: List[int],
                 restart_weights: Sequence[float] = (1, ), eta_min: Optional[float] = None,
                 eta_min_ratio: Optional[float] = None, begin: int = 0, end: int = INF,
                 last_step: int = -1, by_epoch: bool = True, verbose: bool = False):
        if (eta_min is None) == (eta_min_ratio is None):
            raise ValueError('Exactly one of `eta_min` and `eta_min_ratio` should be specified, '
                             f'but got eta_min={eta_min}, eta_min_ratio={eta_min_ratio}')
        if len(periods) != len(restart_weights):
            raise ValueError('periods and restart_weights should have the same length, but got '
                             f'{len(periods)} and {len(restart_weights)}')
        self.periods = periods
        self.eta_min = eta_min
        self.eta_min_ratio = eta_min_ratio
        self.restart_weights = restart_weights
        self.cumulative_periods = [sum(periods[:i + 1]) for i in range(len(periods))]
        super().__init__(optimizer, param_name, begin, end, last_step, by_epoch, verbose)

    def _get_value(self):
        idx = period_index(self.last_step, self.cumulative_periods)
        if idx is None:  # past the last period: leave the value where it ended
            return self._current_values()
        period_start = 0 if idx == 0 else self.cumulative_periods[idx - 1]
        step = self.last_step - period_start
        values = []
        for base_value, value in zip(self.base_values, self._current_values()):
            if step == 0:
                values.append(base_value * self.restart_weights[idx])
            else:
                eta_min = annealing_target(self.eta_min, self.eta_min_ratio, base_value)
                values.append(_cosine_step(value, eta_min, step, self.periods[idx]))
        return values
