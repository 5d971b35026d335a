"""Warm-up schedules: ConstantParamScheduler and LinearParamScheduler (their
LR and momentum forms are in ``lr_scheduler.py`` and ``momentum_scheduler.py``).

Both scale the starting value by a factor for the window ``[begin, end)`` and hand back the full
value when it closes, which is what a warm-up is: a few small-lr steps before the main schedule.
With ``t = last_step`` and ``T = end - begin - 1`` (the window's last step), run alone they give

    Constant:  v_t = base * factor                                    for t < T, and base at t = T
    Linear:    v_t = base * (start_factor + (end_factor - start_factor) * t / T)

Note that with the default ``end=INF`` the constant factor never ends: set ``end``.
"""
from ...registry import PARAM_SCHEDULERS
from .param_scheduler import INF, OptimizerType, _ParamScheduler


def _check_factor(name: str, factor: float) -> float:
    if not 0 <= factor <= 1:
        raise ValueError(f'{name} should be between 0 and 1, but got {factor}')
    return factor


@PARAM_SCHEDULERS.register_module()
class ConstantParamScheduler(_ParamScheduler):
    """Multiply the value by ``factor`` until the window's last step, then restore it."""

    def __init__(self, optimizer: OptimizerType, param_name: str, factor: float = 1.0 / 3,
                 begin: int = 0, end: int = INF, last_step: int = -1, by_epoch: bool = True,
                 verbose: bool = False):
        self.factor = _check_factor('factor', factor)
        self.total_iters = end - begin - 1
        super().__init__(optimizer, param_name, begin, end, last_step, by_epoch, verbose)

    def _get_value(self):
        if self.last_step == 0:
            return self._scaled_values(self.factor)
        if self.last_step == self.total_iters:
            return self._scaled_values(1.0 / self.factor)
        return self._current_values()


@PARAM_SCHEDULERS.register_module()
class LinearParamScheduler(_ParamScheduler):
    """Scale the value by a factor going linearly from ``start_factor`` to ``end_factor``."""

    def __init__(self, optimizer: OptimizerType, param_name: str,
                 start_factor: float = 1.0 / 3, end_factor: float = 1.0, begin: int = 0,
                 end: int = INF, last_step: int = -1, by_epoch: bool = True,
                 verbose: bool = False):
        self.start_factor = _check_factor('start_factor', start_factor)
        self.end_factor = _check_factor('end_factor', end_factor)
        self.total_iters = end - begin - 1
        super().__init__(optimizer, param_name, begin, end, last_step, by_epoch, verbose)

    def _get_value(self):
        if self.last_step == 0:
            return self._scaled_values(self.start_factor)
        # Ratio of this step's factor to the previous one's, so the update is chainable.
        delta = self.end_factor - self.start_factor
        ratio = 1. + delta / (self.total_iters * self.start_factor
                              + (self.last_step - 1) * delta)
        return self._scaled_values(ratio)
