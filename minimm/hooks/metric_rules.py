"""Metric rules: whether a bigger or a smaller value of a metric counts as an improvement.

This file teaches the one decision that CheckpointHook (``save_best``) and EarlyStoppingHook share:
a rule is ``'greater'`` or ``'less'``, and when a config gives none it is inferred from the
metric's name, with the default keys and the matching order of MMEngine 0.10's ``CheckpointHook``
(``'accuracy/top1'`` contains ``'acc'``, so greater is better; ``'val/loss'`` contains ``'loss'``).

Left out compared with MMEngine: nothing; MMEngine keeps these tables as class attributes of each
hook, and both hooks here still expose them under MMEngine's attribute names.
"""
from math import inf
from typing import Sequence

# Whether ``x`` is better than ``y`` under each rule, and the best value before any score is seen.
RULE_MAP = {'greater': lambda x, y: x > y, 'less': lambda x, y: x < y}
INIT_VALUE_MAP = {'greater': -inf, 'less': inf}
DEFAULT_GREATER_KEYS = ['acc', 'top', 'AR@', 'auc', 'precision', 'mAP', 'mDice', 'mIoU', 'mAcc',
                        'aAcc']
DEFAULT_LESS_KEYS = ['loss']


def infer_rule(key: str, greater_keys: Sequence[str] = DEFAULT_GREATER_KEYS,
               less_keys: Sequence[str] = DEFAULT_LESS_KEYS) -> str:
    """'greater' or 'less': whether a bigger ``key`` is better, judged from its name.

    An exact (case-insensitive) match with ``greater_keys``/``less_keys`` decides first, then a
    substring match (``'accuracy/top1'`` contains ``'acc'``).
    """
    name = key.lower()
    greater = {k.lower() for k in greater_keys}
    less = {k.lower() for k in less_keys}
    if name in greater:
        return 'greater'
    if name in less:
        return 'less'
    if any(k in name for k in greater):
        return 'greater'
    if any(k in name for k in less):
        return 'less'
    raise ValueError(f'Cannot infer the rule for key {key}, thus a specific rule must be '
                     'specified.')
