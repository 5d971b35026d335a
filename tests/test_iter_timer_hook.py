"""IterTimerHook: data_time/time scalars and eta, with a fake clock (closed-form values)."""
from types import SimpleNamespace

import pytest

from minimm.hooks import IterTimerHook, iter_timer_hook
from minimm.logging import MessageHub


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def time(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(iter_timer_hook, 'time', fake)
    return fake


def make_runner():
    return SimpleNamespace(message_hub=MessageHub('iter_timer_test'), iter=2, max_iters=10,
                           val_dataloader=range(4), test_dataloader=range(3))


def test_train_eta_averages_over_iterations_run_since_start(clock):
    runner, hook = make_runner(), IterTimerHook()
    hub = runner.message_hub
    hook.before_train(runner)          # resumed at iter 2: start_iter = 2
    clock.now = 0.0
    hook.before_train_epoch(runner)
    clock.now = 1.0
    hook.before_train_iter(runner, batch_idx=0)
    clock.now = 3.0
    hook.after_train_iter(runner, batch_idx=0)
    assert hub.get_scalar('train/data_time').current() == 1.0
    assert hub.get_scalar('train/time').current() == 3.0
    assert hub.get_info('eta') == 3.0 * (10 - 2 - 1)
    runner.iter = 3
    clock.now = 4.0
    hook.before_train_iter(runner, batch_idx=1)
    clock.now = 8.0
    hook.after_train_iter(runner, batch_idx=1)
    assert hub.get_scalar('train/data_time').current() == 1.0
    assert hub.get_scalar('train/time').current() == 5.0
    assert hub.get_info('eta') == (3.0 + 5.0) / 2 * (10 - 3 - 1)


@pytest.mark.parametrize('mode', ['val', 'test'])
def test_val_and_test_eta_use_the_dataloader_and_restart_each_epoch(clock, mode):
    runner, hook = make_runner(), IterTimerHook()
    hub = runner.message_hub
    length = 4 if mode == 'val' else 3
    for _ in range(2):  # the second epoch must not remember the first one's times
        clock.now = 100.0
        getattr(hook, f'before_{mode}_epoch')(runner)
        clock.now = 100.5
        getattr(hook, f'before_{mode}_iter')(runner, batch_idx=0)
        clock.now = 102.0
        getattr(hook, f'after_{mode}_iter')(runner, batch_idx=0)
        assert hub.get_scalar(f'{mode}/data_time').current() == 0.5
        assert hub.get_info('eta') == 2.0 * (length - 1)
        clock.now = 103.0
        getattr(hook, f'after_{mode}_iter')(runner, batch_idx=1)
        assert hub.get_info('eta') == (2.0 + 1.0) / 2 * (length - 2)
        getattr(hook, f'after_{mode}_epoch')(runner)
    assert 'train/time' not in hub.log_scalars


def test_priority_and_stages():
    hook = IterTimerHook()
    assert hook.priority == 'NORMAL'
    assert 'before_train' in hook.get_triggered_stages()
    assert 'after_test_epoch' in hook.get_triggered_stages()
