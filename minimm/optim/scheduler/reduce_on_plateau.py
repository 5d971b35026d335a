"""ReduceOnPlateau: lower the value when a validation metric stops improving.

This is the one scheduler driven by *metrics* rather than by a step count, so it has
``need_val_args = True`` and ParamSchedulerHook calls ``step(metrics)`` on it after each validation
epoch. The plain ``step()`` that the hook makes after each training epoch only advances
``_global_step``, which places the scheduler inside or outside its ``[begin, end)`` window.

After each evaluation: if ``metrics[monitor]`` beat the best by more than ``threshold`` (relative
or absolute), it becomes the best; otherwise one more "bad epoch" is counted. More than
``patience`` bad epochs multiply the value by ``factor`` (not below ``min_value``; changes smaller
than ``eps`` are ignored) and start ``cooldown`` epochs during which bad epochs are not counted.
Same as MMEngine and torch's ReduceLROnPlateau (``rule`` is torch's ``mode``). MMEngine only
supports ``by_epoch=True`` here, and so does minimm: ``convert_to_iter_based`` is rejected.
"""
from typing import Dict, Sequence, Union

from ...registry import PARAM_SCHEDULERS
from ..optim_wrapper import OptimWrapper
from .param_scheduler import INF, OptimizerType, _ParamScheduler


@PARAM_SCHEDULERS.register_module()
class ReduceOnPlateauParamScheduler(_ParamScheduler):
    """Multiply the value by ``factor`` after ``patience`` evaluations without improvement.

    Args:
        monitor: the metric key to watch.
        rule: ``'less'`` (lower is better) or ``'greater'``.
        factor: multiplier applied on a plateau, < 1.
        patience: evaluations without improvement tolerated before reducing.
        threshold: minimum improvement that counts.
        threshold_rule: ``'rel'`` (best * (1 -/+ threshold)) or ``'abs'`` (best -/+ threshold).
        cooldown: evaluations to wait after a reduction before counting bad epochs again.
        min_value: lower bound, one for all groups or one per group.
        eps: reductions smaller than this are skipped.
    """

    need_val_args = True

    def __init__(self, optimizer: OptimizerType, param_name: str, monitor: str = 'loss',
                 rule: str = 'less', factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_rule: str = 'rel', cooldown: int = 0,
                 min_value: Union[float, Sequence[float]] = 0., eps: float = 1e-8,
                 begin: int = 0, end: int = INF, last_step: int = -1, by_epoch: bool = True,
                 verbose: bool = False):
        if not by_epoch:
            raise ValueError(f'{type(self).__name__} only supports by_epoch=True')
        if factor >= 1.0:
            raise ValueError(f'factor should be < 1.0, but got {factor}')
        if threshold < 0:
            raise ValueError(f'threshold {threshold} should be >= 0.')
        if rule not in ('less', 'greater'):
            raise ValueError(f"rule should be 'less' or 'greater', but got {rule!r}")
        if threshold_rule not in ('rel', 'abs'):
            raise ValueError(f"threshold_rule should be 'rel' or 'abs', but got {threshold_rule!r}")
        # Unlike the other schedulers, construction does not count as a step: the first
        # evaluation is the first thing this scheduler can react to.
        self._attach(optimizer, param_name, begin, end, last_step, by_epoch)
        # Attributes are set in MMEngine's order, so state_dict() lists its keys in that order.
        self.last_step = last_step
        self._global_step = 0
        self.verbose = verbose
        self.factor = factor
        self.min_values = self._format_min_values(optimizer, min_value)
        self.patience = patience
        self.cooldown = cooldown
        self.cooldown_counter = 0
        self.rule_worse = INF if rule == 'less' else -INF
        self.best = self.rule_worse
        self.num_bad_epochs = 0
        self.eps = eps
        self.monitor = monitor
        self.rule = rule
        self.threshold = threshold
        self.threshold_rule = threshold_rule
        self._last_value = self._current_values()

    @staticmethod
    def _format_min_values(optimizer: OptimizerType, min_value) -> list:
        if not isinstance(min_value, (list, tuple)):
            return [min_value] * len(optimizer.param_groups)
        raw_optimizer = optimizer.optimizer if isinstance(optimizer, OptimWrapper) else optimizer
        if len(min_value) != len(raw_optimizer.param_groups):
            raise ValueError(f'expected {len(raw_optimizer.param_groups)} min_values, '
                             f'got {len(min_value)}')
        min_values = list(min_value)
        if isinstance(optimizer, OptimWrapper) and optimizer.base_param_settings is not None:
            # The wrapper's extra "base" group takes the last group's bound.
            min_values.append(min_values[-1])
        return min_values

    @classmethod
    def build_iter_from_epoch(cls, *args, **kwargs):
        raise TypeError(f'{cls.__name__} reacts to validation metrics once per epoch and cannot '
                        'be converted to iteration-based (convert_to_iter_based=True)')

    def step(self, metrics: Dict[str, float] = None) -> None:
        """Without metrics: count a training epoch. With metrics: judge them and maybe reduce."""
        if metrics is None:
            self._global_step += 1
            return
        if not isinstance(metrics, dict):
            raise TypeError(f'metrics type should be dict, but got type {type(metrics)}')
        if self.begin <= self._global_step < self.end:
            self.last_step += 1
            if self.monitor not in metrics:
                raise KeyError(f'{type(self).__name__} monitors {self.monitor!r}, which is not '
                               f'in the metrics {list(metrics)}')
            metric = metrics[self.monitor]
            if self._is_better(metric, self.best):
                self.best = metric
                self.num_bad_epochs = 0
            else:
                self.num_bad_epochs += 1
            if self.cooldown_counter > 0:
                self.cooldown_counter -= 1
                self.num_bad_epochs = 0  # bad epochs during a cooldown do not count
            if self.num_bad_epochs > self.patience:
                for i, (group, value) in enumerate(zip(self.optimizer.param_groups,
                                                       self._get_value())):
                    if group[self.param_name] - value > self.eps:
                        group[self.param_name] = value
                        self.print_value(self.verbose, i, value)
                self.cooldown_counter = self.cooldown
                self.num_bad_epochs = 0
        self._last_value = self._current_values()

    def _get_value(self):
        return [max(float(v) * self.factor, min_value)
                for v, min_value in zip(self._current_values(), self.min_values)]

    def _is_better(self, a: float, best: float) -> bool:
        if self.rule == 'less':
            if self.threshold_rule == 'rel':
                return a < best * (1. - self.threshold)
            return a < best - self.threshold
        if self.threshold_rule == 'rel':
            return a > best * (self.threshold + 1.)
        return a > best + self.threshold
