"""EmptyCacheHook: when it empties the CUDA cache, counted through a stand-in for the call."""
from types import SimpleNamespace

import pytest
import torch

from minimm.hooks import EmptyCacheHook, empty_cache_hook
from toy import toy_runner


@pytest.mark.parametrize('kwargs, expected', [
    # 2 train epochs of 3 iterations, each followed by a val epoch of 2 iterations.
    (dict(), 4),                                                        # after each epoch
    (dict(before_epoch=True), 8),                                       # + before each epoch
    (dict(after_epoch=False, after_iter=True), 2 * 3 + 2 * 2),          # after each iteration
    (dict(after_epoch=False), 0),
])
def test_number_of_calls_with_cuda(tmp_path, monkeypatch, kwargs, expected):
    # CUDA looks available to the hook's module only: the Runner and the other hooks ask
    # torch.cuda.is_available() too, and would move the model to a GPU that is not there.
    calls = []
    fake_cuda = SimpleNamespace(is_available=lambda: True, empty_cache=lambda: calls.append(1))
    monkeypatch.setattr(empty_cache_hook, 'torch', SimpleNamespace(cuda=fake_cuda))
    toy_runner(tmp_path, max_=2, custom_hooks=[EmptyCacheHook(**kwargs)],
               default_hooks=dict(checkpoint=None)).train()
    assert len(calls) == expected


def test_without_cuda_nothing_is_emptied(tmp_path, monkeypatch):
    # As MMEngine's (is_cuda_available() first): on a CPU machine every switch on empties nothing.
    calls = []
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    monkeypatch.setattr(torch.cuda, 'empty_cache', lambda: calls.append(1))
    toy_runner(tmp_path, max_=2, custom_hooks=[EmptyCacheHook(before_epoch=True, after_iter=True)],
               default_hooks=dict(checkpoint=None)).train()
    assert calls == []


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
