"""EmptyCacheHook: when it empties the CUDA cache, counted through a stand-in for the call."""
import pytest
import torch

from minimm.hooks import EmptyCacheHook
from toy import toy_runner


@pytest.mark.parametrize('kwargs, expected', [
    # 2 train epochs of 3 iterations, each followed by a val epoch of 2 iterations.
    (dict(), 4),                                                        # after each epoch
    (dict(before_epoch=True), 8),                                       # + before each epoch
    (dict(after_epoch=False, after_iter=True), 2 * 3 + 2 * 2),          # after each iteration
    (dict(after_epoch=False), 0),
])
def test_number_of_calls(tmp_path, monkeypatch, kwargs, expected):
    calls = []
    monkeypatch.setattr(torch.cuda, 'empty_cache', lambda: calls.append(1))
    toy_runner(tmp_path, max_=2, custom_hooks=[EmptyCacheHook(**kwargs)],
               default_hooks=dict(checkpoint=None)).train()
    assert len(calls) == expected


def test_stages_and_priority():
    hook = EmptyCacheHook()
    assert hook.priority == 'NORMAL'
    assert hook.get_triggered_stages() == [
        'before_train_epoch', 'after_train_iter',
        'after_train_epoch', 'before_val_epoch', 'after_val_iter', 'after_val_epoch',
        'before_test_epoch', 'after_test_iter', 'after_test_epoch']


def test_built_from_config():
    from minimm.registry import HOOKS
    hook = HOOKS.build(dict(type='EmptyCacheHook', after_iter=True))
    assert isinstance(hook, EmptyCacheHook) and hook._do_after_iter and hook._do_after_epoch
