"""Hook base: stage list, funnels, helpers, get_triggered_stages; Priority and get_priority."""
from types import SimpleNamespace

import pytest

from minimm.hooks import Hook
from minimm.runner import Priority, get_priority


def test_stages_are_mmengines_22_in_order():
    assert len(Hook.stages) == 22
    assert Hook.stages[:3] == ('before_run', 'after_load_checkpoint', 'before_train')
    assert Hook.stages[-1] == 'after_run'
    assert Hook.stages.index('before_save_checkpoint') < Hook.stages.index('after_train')


def test_funnels_pass_mode_and_arguments():
    calls = []

    class Funnel(Hook):
        def _before_epoch(self, runner, mode='train'):
            calls.append(('before_epoch', mode))

        def _after_iter(self, runner, batch_idx, data_batch=None, outputs=None, mode='train'):
            calls.append(('after_iter', mode, batch_idx, data_batch, outputs))

    hook = Funnel()
    hook.before_val_epoch(None)
    hook.after_test_iter(None, batch_idx=3, data_batch='d', outputs='o')
    hook.after_train_iter(None, 1)
    assert calls == [('before_epoch', 'val'), ('after_iter', 'test', 3, 'd', 'o'),
                     ('after_iter', 'train', 1, None, None)]


def test_triggered_stages_in_stage_order():
    class A(Hook):
        def after_run(self, runner):
            pass

        def _after_epoch(self, runner, mode='train'):
            pass

        def before_run(self, runner):
            pass

    assert A().get_triggered_stages() == ['before_run', 'after_train_epoch', 'after_val_epoch',
                                          'after_test_epoch', 'after_run']
    assert Hook().get_triggered_stages() == []


def test_helpers():
    hook = Hook()
    runner = SimpleNamespace(epoch=3, iter=9, max_epochs=4, max_iters=10)
    assert hook.every_n_epochs(runner, 2)            # epoch 4 (1-based) is a multiple of 2
    assert not hook.every_n_epochs(runner, 3)
    assert hook.every_n_epochs(runner, 3, start=1)   # (3 + 1 - 1) % 3 == 0
    assert not hook.every_n_epochs(runner, 2, start=5)
    assert not hook.every_n_epochs(runner, 0)
    assert hook.every_n_train_iters(runner, 5) and not hook.every_n_train_iters(runner, 3)
    assert hook.every_n_inner_iters(4, 5) and not hook.every_n_inner_iters(4, -1)
    assert hook.end_of_epoch([0, 1, 2], 2) and not hook.end_of_epoch([0, 1, 2], 1)
    assert hook.is_last_train_epoch(runner) and hook.is_last_train_iter(runner)


@pytest.mark.parametrize('value, expected', [
    (0, 0), (100, 100), (49, 49), ('NORMAL', 50), ('Lowest', 100), ('very_high', 10),
    (Priority.ABOVE_NORMAL, 40), (Priority.BELOW_NORMAL, 60)])
def test_get_priority(value, expected):
    assert get_priority(value) == expected


def test_get_priority_errors():
    with pytest.raises(ValueError, match='between 0 and 100'):
        get_priority(101)
    with pytest.raises(ValueError, match='between 0 and 100'):
        get_priority(-1)
    with pytest.raises(KeyError, match='BOGUS'):
        get_priority('BOGUS')
    with pytest.raises(TypeError, match='integer or Priority'):
        get_priority(1.5)
    assert [p.value for p in Priority] == [0, 10, 30, 40, 50, 60, 70, 90, 100]


def test_repr_names_the_class_and_priority(tmp_path):
    from minimm.hooks import CheckpointHook
    from toy import toy_runner
    hook = CheckpointHook()
    hook.priority = 85
    assert repr(Hook()) == "Hook(priority='NORMAL')"
    assert repr(hook) == 'CheckpointHook(priority=85)'
    runner = toy_runner(tmp_path, default_hooks=dict(logger=None, param_scheduler=None))
    assert repr(runner.hooks) == ("[RuntimeInfoHook(priority='VERY_HIGH'), "
                                  "IterTimerHook(priority='NORMAL'), "
                                  "DistSamplerSeedHook(priority='NORMAL'), "
                                  "CheckpointHook(priority='VERY_LOW')]")
