"""EarlyStoppingHook: patience with min_delta, threshold, non-finite values, missing metric."""
import math

import pytest

from minimm.hooks import EarlyStoppingHook
from toy import ScriptedMetric, toy_loader, toy_runner


def _train(tmp_path, scores, **hook_kwargs):
    runner = toy_runner(tmp_path, max_=len(scores), val=False, val_dataloader=toy_loader(8, 4),
                        val_cfg=dict(), val_evaluator=ScriptedMetric(scores),
                        custom_hooks=[dict(type='EarlyStoppingHook', monitor='toy/acc',
                                           **hook_kwargs)])
    runner.train()
    return runner


def test_patience_counts_improvements_below_min_delta_as_none(tmp_path):
    # 60.05 does not beat 60 by more than min_delta=0.1: with 59 that is 2 bad epochs.
    runner = _train(tmp_path, [50, 60, 60.05, 59, 70, 80], patience=2)
    assert runner.epoch == 4


def test_threshold_and_rule_inference(tmp_path):
    runner = _train(tmp_path / 'a', [50, 91, 95], stopping_threshold=90)
    assert runner.epoch == 2
    assert EarlyStoppingHook('val/loss').rule == 'less'
    assert EarlyStoppingHook('accuracy/top1').rule == 'greater'
    with pytest.raises(ValueError, match='Cannot infer the rule'):
        EarlyStoppingHook('bleu')
    with pytest.raises(ValueError, match='greater" or "less"'):
        EarlyStoppingHook('bleu', rule='bigger')


def test_non_finite_stops_and_missing_metric(tmp_path):
    assert _train(tmp_path / 'a', [50, math.nan, 60]).epoch == 2
    with pytest.warns(UserWarning, match='not among the metrics'):
        EarlyStoppingHook('other/acc').after_val_epoch(None, {'toy/acc': 1.0})
    with pytest.raises(RuntimeError, match='strict=False'):
        EarlyStoppingHook('other/acc', strict=True).after_val_epoch(None, {'toy/acc': 1.0})
