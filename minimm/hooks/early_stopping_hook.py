"""EarlyStoppingHook: stop training when a validation metric stops improving.

After each validation the hook compares ``metrics[monitor]`` with the best value so far. It ends
training (``runner.train_loop.stop_training = True``, which the loop checks before the next
epoch or iteration) when:

* the value is not finite (``check_finite``),
* it passed ``stopping_threshold``, or
* it has not beaten the best by more than ``min_delta`` for ``patience`` validations in a row.

``rule`` ('greater' or 'less') is inferred from the metric's name when not given, with the same
keys as CheckpointHook's ``save_best`` (see ``metric_rules.py``). Behaviour and defaults are those
of MMEngine 0.10.7's EarlyStoppingHook, including ``min_delta=0.1`` (MMEngine's docstring says
0.01, its code uses 0.1).
"""
import warnings
from math import inf, isfinite
from typing import Dict, Optional, Tuple

from ..registry import HOOKS
from .hook import Hook
from .metric_rules import RULE_MAP, infer_rule


@HOOKS.register_module()
class EarlyStoppingHook(Hook):
    """Stop training early; see the module docstring.

    Args:
        monitor: the metric key, e.g. ``'accuracy/top1'``.
        rule: ``'greater'`` or ``'less'``; inferred from ``monitor`` when None.
        min_delta: the smallest change that counts as an improvement.
        strict: raise (instead of warn) when ``monitor`` is missing from the metrics.
        check_finite: stop on a NaN or infinite value.
        patience: validations without improvement before stopping.
        stopping_threshold: stop as soon as the value is better than this.
    """

    priority = 'LOWEST'
    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {'before_run': '', 'after_val_epoch': 'metrics:{monitor} -> train_loop'}
    rule_map = RULE_MAP

    def __init__(self, monitor: str, rule: Optional[str] = None, min_delta: float = 0.1,
                 strict: bool = False, check_finite: bool = True, patience: int = 5,
                 stopping_threshold: Optional[float] = None):
        if rule is None:
            rule = infer_rule(monitor)
        elif rule not in self.rule_map:
            raise ValueError(f'`rule` should be either "greater" or "less", but got {rule}')
        self.monitor = monitor
        self.rule = rule
        # Stored with the sign of the rule, so "best + min_delta" is the value to beat either way.
        self.min_delta = min_delta if rule == 'greater' else -min_delta
        self.strict = strict
        self.check_finite = check_finite
        self.patience = patience
        self.stopping_threshold = stopping_threshold
        self.wait_count = 0
        self.best_score = -inf if rule == 'greater' else inf

    def before_run(self, runner) -> None:
        # As MMEngine: the train loop must support `stop_training` (reading runner.train_loop
        # raises a RuntimeError when the runner has no train_cfg).
        if not hasattr(runner.train_loop, 'stop_training'):
            raise RuntimeError('EarlyStoppingHook needs a train loop with `stop_training`')

    def _check_stop_condition(self, score: float) -> Tuple[bool, str]:
        better = self.rule_map[self.rule]
        if self.check_finite and not isfinite(score):
            return True, (f'Monitored metric {self.monitor} = {score} is infinite. '
                          f'Previous best value was {self.best_score:.3f}.')
        if self.stopping_threshold is not None and better(score, self.stopping_threshold):
            self.best_score = score
            return True, (f'Stopping threshold reached: `{self.monitor}` = {score} is '
                          f'{self.rule} than {self.stopping_threshold}.')
        if better(self.best_score + self.min_delta, score):
            self.wait_count += 1
            if self.wait_count >= self.patience:
                return True, (f'the monitored metric did not improve in the last '
                              f'{self.wait_count} records. best score: {self.best_score:.3f}. ')
            return False, ''
        self.best_score = score
        self.wait_count = 0
        return False, ''

    def after_val_epoch(self, runner, metrics: Optional[Dict[str, float]] = None) -> None:
        metrics = metrics or {}
        if self.monitor not in metrics:
            message = (f'early stopping monitors `{self.monitor}`, which is not among the '
                       f'metrics {sorted(metrics)}')
            if self.strict:
                raise RuntimeError(message + '; set strict=False to skip instead')
            warnings.warn(message + '; skipped')
            return
        stop, message = self._check_stop_condition(metrics[self.monitor])
        if stop:
            runner.train_loop.stop_training = True
            runner.logger.info(message)
