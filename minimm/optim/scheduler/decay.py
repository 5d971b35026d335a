"""Decay schedules: Step, MultiStep, Exponential and Poly (their LR and momentum
forms are in ``lr_scheduler.py`` and ``momentum_scheduler.py``).

Run alone, with ``t = last_step`` (steps since ``begin``) and ``T = end - begin - 1``:

    Step:         v_t = base * gamma ** (t // step_size)
    MultiStep:    v_t = base * gamma ** (number of milestones <= t)
    Exponential:  v_t = base * gamma ** t
    Poly:         v_t = eta_min + (base - eta_min) * (1 - t / T) ** power

Each is computed in the chainable form, one factor per step, from the group's current value.
"""
from collections import Counter
from typing import List

from ...registry import PARAM_SCHEDULERS
from .param_scheduler import INF, OptimizerType, _ParamScheduler


@PARAM_SCHEDULERS.register_module()
class StepParamScheduler(_ParamScheduler):
    """Multiply the value by ``gamma`` every ``step_size`` steps."""

    _epoch_args = ('step_size',)

    def __init__(self, optimizer: OptimizerType, param_name: str, step_size: int,
                 gamma: float = 0.1, begin: int = 0, end: int = INF, last_step: int = -1,
                 by_epoch: bool = True, verbose: bool = False):
        if step_size <= 0:
            raise ValueError(f'step_size should be positive, but got {step_size}')
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, param_name, begin, end, last_step, by_epoch, verbose)

    def _get_value(self):
        if self.last_step == 0 or self.last_step % self.step_size != 0:
            return self._current_values()
        return self._scaled_values(self.gamma)


@PARAM_SCHEDULERS.register_module()
class MultiStepParamScheduler(_ParamScheduler):
    """Multiply the value by ``gamma`` at each milestone (a repeated milestone applies twice)."""

    _epoch_args = ('milestones',)

    def __init__(self, optimizer: OptimizerType, param_name: str, milestones: List[int],
                 gamma: float = 0.1, last_step: int = -1, begin: int = 0, end: int = INF,
                 by_epoch: bool = True, verbose: bool = False):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, param_name, begin, end, last_step, by_epoch, verbose)

    def _get_value(self):
        if self.last_step not in self.milestones:
            return self._current_values()
        return self._scaled_values(self.gamma ** self.milestones[self.last_step])


@PARAM_SCHEDULERS.register_module()
class ExponentialParamScheduler(_ParamScheduler):
    """Multiply the value by ``gamma`` every step."""

    def __init__(self, optimizer: OptimizerType, param_name: str, gamma: float,
                 begin: int = 0, end: int = INF, last_step: int = -1, by_epoch: bool = True,
                 verbose: bool = False):
        self.gamma = gamma
        super().__init__(optimizer, param_name, begin, end, last_step, by_epoch, verbose)

    def _get_value(self):
        if self.last_step == 0:
            return self._current_values()
        return self._scaled_values(self.gamma)


@PARAM_SCHEDULERS.register_module()
class PolyParamScheduler(_ParamScheduler):
    """Decay polynomially from the starting value to ``eta_min`` at the window's last step."""

    def __init__(self, optimizer: OptimizerType, param_name: str, eta_min: float = 0,
                 power: float = 1.0, begin: int = 0, end: int = INF, last_step: int = -1,
                 by_epoch: bool = True, verbose: bool = False):
        self.eta_min = eta_min
        self.power = power
        self.total_iters = end - begin - 1
        super().__init__(optimizer, param_name, begin, end, last_step, by_epoch, verbose)

    def _get_value(self):
        if self.last_step == 0:
            return self._current_values()
        # (1 - t/T)^p / (1 - (t-1)/T)^p, written as MMEngine does for identical rounding.
        factor = (1 - 1 / (self.total_iters - self.last_step + 1)) ** self.power
        return [(v - self.eta_min) * factor + self.eta_min for v in self._current_values()]
