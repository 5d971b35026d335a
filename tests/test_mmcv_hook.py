"""minimm.mmcv's Hook, HOOKS registry, build_from_cfg and LogBuffer, against MMCV 1.7's behaviour."""
import numpy as np
import pytest

import minimm.registry
from minimm.mmcv import HOOKS, Hook, LogBuffer, build_from_cfg
from minimm.registry import Registry


class Recorder(Hook):
    def __init__(self):
        self.calls = []

    def before_epoch(self, runner):
        self.calls.append('before_epoch')

    def after_iter(self, runner):
        self.calls.append('after_iter')


class FakeRunner:
    epoch, iter, inner_iter, max_epochs, max_iters = 2, 5, 1, 3, 6
    _max_epochs, _max_iters = max_epochs, max_iters  # what is_last_epoch/iter read, as MMCV
    data_loader = [0, 1]


def test_ten_stages_in_mmcv_order():
    assert Hook.stages == ('before_run', 'before_train_epoch', 'before_train_iter', 'after_train_iter',
                           'after_train_epoch', 'before_val_epoch', 'before_val_iter', 'after_val_iter',
                           'after_val_epoch', 'after_run')
    assert not hasattr(Hook(), 'priority')


def test_train_and_val_stages_funnel_into_the_generic_methods():
    hook = Recorder()
    for stage in Hook.stages:
        getattr(hook, stage)(None)
    assert hook.calls == ['before_epoch', 'after_iter', 'before_epoch', 'after_iter']


def test_triggered_stages_follow_the_funnels_in_stage_order():
    class H(Hook):
        def after_epoch(self, runner):
            pass

        def before_run(self, runner):
            pass

    assert H().get_triggered_stages() == ['before_run', 'after_train_epoch', 'after_val_epoch']
    assert Recorder().get_triggered_stages() == ['before_train_epoch', 'after_train_iter',
                                                 'before_val_epoch', 'after_val_iter']
    hook = Hook()
    hook.after_run = lambda runner: None  # an instance attribute never counts
    assert hook.get_triggered_stages() == []


def test_helpers_read_the_runner_counters():
    h, r = Hook(), FakeRunner()
    assert h.every_n_epochs(r, 3) and not h.every_n_epochs(r, 2) and not h.every_n_epochs(r, 0)
    assert h.every_n_iters(r, 2) and h.every_n_iters(r, 3) and not h.every_n_iters(r, 4)
    assert h.every_n_inner_iters(r, 2) and not h.every_n_inner_iters(r, -1)
    assert h.end_of_epoch(r)
    assert h.is_last_epoch(r) and h.is_last_iter(r)
    r.iter = 4
    assert not h.is_last_iter(r)


def test_hooks_registry_is_separate_from_the_mmengine_one():
    assert HOOKS is not minimm.registry.HOOKS and HOOKS.name == 'hook'


def test_build_from_cfg_errors_as_mmcv():
    reg = Registry('hook', build_func=build_from_cfg)

    @reg.register_module()
    class Picky:
        def __init__(self, x):
            if x < 0:
                raise ValueError('x must be >= 0')

    with pytest.raises(KeyError, match='FlatcosineannealingLrUpdaterHook is not in the hook registry'):
        reg.build(dict(type='FlatcosineannealingLrUpdaterHook'))
    with pytest.raises(ValueError, match='^Picky: x must be >= 0$'):
        reg.build(dict(type='Picky', x=-1))
    with pytest.raises(TypeError, match='^Picky: '):
        reg.build(dict(type='Picky', y=1))
    with pytest.raises(TypeError):
        build_from_cfg([('type', 'Picky')], reg)
    with pytest.raises(KeyError):
        build_from_cfg(dict(x=1), reg)
    cfg = dict(type='Picky')
    assert isinstance(reg.build(cfg, default_args=dict(x=1, type='Nope')), Picky)
    assert cfg == dict(type='Picky')


def test_log_buffer_weighted_averages():
    buf = LogBuffer()
    buf.update(dict(loss=1, acc=0.5), count=2)
    buf.update(dict(acc=1.0, loss=4), count=1)
    buf.update(dict(loss=7), count=1)
    assert list(buf.val_history) == ['loss', 'acc']
    buf.average(2)
    assert buf.ready and buf.output['loss'] == pytest.approx(5.5)
    assert buf.output['acc'] == pytest.approx((0.5 * 2 + 1.0) / 3)
    buf.average()
    assert buf.output['loss'] == pytest.approx((2 + 4 + 7) / 4)
    assert type(buf.output['loss']) is np.float64
    buf.average(100)
    assert buf.output['loss'] == pytest.approx(13 / 4)
    buf.output['extra'] = 1
    buf.average(1)
    assert buf.output['extra'] == 1 and buf.output['loss'] == 7
    buf.clear_output()
    assert not buf.ready and not buf.output and buf.val_history
    buf.clear()
    assert not buf.val_history and not buf.n_history
    with pytest.raises(AssertionError):
        buf.average(-1)
