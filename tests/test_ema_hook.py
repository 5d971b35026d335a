"""EMAHook inside the Runner: the averaging rules against closed forms over a real training run,
native == reference, the swaps around evaluation, checkpoint contents, resume, loading checkpoints
without EMA (the two minimm extras beside it: tests/test_ema_extras.py).

The toy run: 2 epochs of 3 iterations (SGD), a validation after each epoch (see tests/toy.py).
"""
import os

import pytest
import torch

import minimm.ops.averaging as averaging
from minimm.hooks import EMAHook, Hook
from minimm.ops import backend_info
from test_ops_ema import assert_within_fallback_bound, magnitude
from toy import ToyMetric, WeightRecorder, toy_loader, toy_runner

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py


def ema_of(runner):
    return next(h for h in runner.hooks if isinstance(h, EMAHook)).ema_model


def params(module):
    return [p.detach().clone() for p in module.parameters()]


def train(tmp_path, ema_kwargs, max_epochs=2, **kwargs):
    recorder = WeightRecorder()
    runner = toy_runner(tmp_path, max_=max_epochs,
                        custom_hooks=[dict(type='EMAHook', priority=49, **ema_kwargs), recorder],
                        **kwargs)
    runner.train()
    return runner, recorder.seen


def expected_average(raw, weight, start=0, interval=1):
    """MMEngine's recurrence: before ``start`` the copy follows the raw weights; then call
    ``steps = 0, 1, ...`` copies (0), averages with ``weight(steps)`` (steps % interval == 0), or
    keeps the average."""
    avg = None
    for k, p in enumerate(raw):
        steps = k - start
        if steps <= 0:
            avg = [t.clone() for t in p]
        elif steps % interval == 0:
            m = weight(steps)
            avg = [(1 - m) * a + m * t for a, t in zip(avg, p)]
    return avg


@pytest.mark.parametrize('ema_kwargs, weight, start, interval', [
    (dict(momentum=0.1), lambda s: 0.1, 0, 1),
    (dict(momentum=0.3, interval=2), lambda s: 0.3, 0, 2),
    (dict(momentum=0.2, begin_iter=3), lambda s: 0.2, 2, 1),          # starts at iter index 2
    (dict(momentum=0.2, begin_epoch=2), lambda s: 0.2, 3, 1),         # first iter of epoch 2
    (dict(ema_type='MomentumAnnealingEMA', momentum=0.01, gamma=4),
     lambda s: max(0.01, 4 / (4 + s)), 0, 1),
    (dict(ema_type='StochasticWeightAverage', interval=2), lambda s: 1 / (s // 2 + 1), 0, 2),
])
def test_averages_match_closed_forms(tmp_path, ema_kwargs, weight, start, interval):
    runner, raw = train(tmp_path, ema_kwargs)
    assert len(raw) == 6
    expected = expected_average(raw, weight, start, interval)
    ema = ema_of(runner)
    for got, want in zip(ema.module.parameters(), expected):
        assert torch.allclose(got.double(), want, rtol=1e-6, atol=1e-7)
    assert ema.steps.item() == 6 - start


def test_native_and_reference_give_the_same_ema(tmp_path, monkeypatch):
    if backend_info()['cpu']['backend'] != 'native':
        pytest.skip(f"native ops unavailable: {backend_info()['cpu']['reason']}")
    results = {}
    for backend in ('native', 'ref'):
        monkeypatch.setattr(averaging, 'PLAN_BACKEND', backend)
        runner, _ = train(tmp_path / backend, dict(momentum=0.1, update_buffers=True))
        results[backend] = ema_of(runner).state_dict()
    for key, value in results['native'].items():  # the bound minimm/ops/ema.py states, per update
        assert_within_fallback_bound(value, results['ref'][key], magnitude(value) + 1, updates=20)


class SwapRecorder(Hook):
    """Before the EMAHook's swap (VERY_HIGH) and after it (LOWEST), what model and copy hold."""

    def __init__(self, priority, log):
        self.priority = priority
        self.log = log

    def _record(self, runner, stage):
        self.log.append((stage, self.priority, params(runner.model),
                         params(ema_of(runner).module)))

    def before_val_epoch(self, runner):
        self._record(runner, 'before_val_epoch')

    def before_val_iter(self, runner, batch_idx, data_batch=None):
        if batch_idx == 0:
            self._record(runner, 'val_iter')

    def after_val_epoch(self, runner, metrics=None):
        self._record(runner, 'after_val_epoch')


def test_validation_runs_on_ema_weights_and_training_resumes_on_raw(tmp_path):
    log = []
    runner = toy_runner(tmp_path, max_=1, custom_hooks=[
        dict(type='EMAHook', momentum=0.1), SwapRecorder('VERY_HIGH', log),
        SwapRecorder('LOWEST', log)])
    runner.train()
    seen = {(stage, priority): (model, copy) for stage, priority, model, copy in log}
    raw, ema = seen['before_val_epoch', 'VERY_HIGH']  # before EMAHook's swap
    model_during, copy_during = seen['val_iter', 'LOWEST']
    raw_after, ema_after = seen['after_val_epoch', 'LOWEST']  # after the swap back
    assert not all(torch.equal(a, b) for a, b in zip(raw, ema))
    assert all(torch.equal(a, b) for a, b in zip(model_during, ema))   # evaluation sees the EMA
    assert all(torch.equal(a, b) for a, b in zip(copy_during, raw))
    assert all(torch.equal(a, b) for a, b in zip(raw_after, raw))      # swapped back
    assert all(torch.equal(a, b) for a, b in zip(ema_after, ema))


def test_checkpoint_holds_ema_in_state_dict_and_raw_in_ema_state_dict(tmp_path):
    runner, _ = train(tmp_path, dict(momentum=0.1))
    ckpt = torch.load(tmp_path / 'epoch_2.pth', weights_only=True)
    assert list(ckpt) == ['meta', 'state_dict', 'message_hub', 'optimizer', 'ema_state_dict']
    raw_state, ema_state = runner.model.state_dict(), ema_of(runner).module.state_dict()
    assert list(ckpt['state_dict']) == list(raw_state)
    assert list(ckpt['ema_state_dict']) == ['steps'] + [f'module.{k}' for k in raw_state]
    assert ckpt['ema_state_dict']['steps'].item() == 6
    for key in raw_state:
        assert torch.equal(ckpt['state_dict'][key], ema_state[key])
        assert torch.equal(ckpt['ema_state_dict'][f'module.{key}'], raw_state[key])


def test_train_4_epochs_equals_train_2_then_resume_2(tmp_path):
    straight, _ = train(tmp_path / 'straight', dict(momentum=0.1), max_epochs=4)
    train(tmp_path / 'resumed', dict(momentum=0.1), max_epochs=2)
    resumed, _ = train(tmp_path / 'resumed', dict(momentum=0.1), max_epochs=4, resume=True)
    assert resumed.iter == 12
    for a, b in zip(params(straight.model), params(resumed.model)):
        assert torch.equal(a, b)
    for (key, a), b in zip(ema_of(straight).state_dict().items(),
                           ema_of(resumed).state_dict().values()):
        assert torch.equal(a, b), key
    files = [torch.load(d / 'epoch_4.pth', weights_only=True)
             for d in (tmp_path / 'straight', tmp_path / 'resumed')]
    for part in ('state_dict', 'ema_state_dict'):
        for key, value in files[0][part].items():
            assert torch.equal(value, files[1][part][key]), (part, key)


def _log_text(runner):
    with open(os.path.join(runner.log_dir, f'{runner.timestamp}.log')) as f:
        return f.read()


@pytest.mark.parametrize('resume', [False, True])
def test_checkpoint_without_ema_loads_with_a_warning(tmp_path, resume):
    toy_runner(tmp_path / 'plain', max_=1).train()
    ckpt = torch.load(tmp_path / 'plain' / 'epoch_1.pth', weights_only=True)
    runner = toy_runner(tmp_path / 'ema', max_=1 + resume, load_from=str(tmp_path / 'plain' /
                                                                           'epoch_1.pth'),
                        resume=resume, custom_hooks=[dict(type='EMAHook', momentum=0.1)])
    if resume:
        # The copy starts from the checkpoint, then averages one more epoch: steps 0..2.
        runner.train()
        assert ema_of(runner).steps.item() == 3
        assert 'Resuming from a checkpoint without `ema_state_dict`' in _log_text(runner)
    else:
        runner.val()
        for key, value in ema_of(runner).module.state_dict().items():
            assert torch.equal(value, ckpt['state_dict'][key]), key
        assert 'Loading a checkpoint without `ema_state_dict`' in _log_text(runner)


def test_load_from_ema_checkpoint_tests_the_ema_weights(tmp_path):
    train(tmp_path / 'train', dict(momentum=0.1))
    ckpt = torch.load(tmp_path / 'train' / 'epoch_2.pth', weights_only=True)
    seen = []

    class TestRecorder(Hook):
        priority = 'LOWEST'

        def before_test_iter(self, runner, batch_idx, data_batch=None):
            seen.append(runner.model.state_dict())

    runner = toy_runner(tmp_path / 'test', val=False, load_from=str(tmp_path / 'train' /
                                                                    'epoch_2.pth'),
                        test_dataloader=toy_loader(8, 4), test_cfg=dict(),
                        test_evaluator=ToyMetric(),
                        custom_hooks=[dict(type='EMAHook', momentum=0.1), TestRecorder()])
    runner.test()
    for key, value in seen[0].items():
        assert torch.equal(value, ckpt['state_dict'][key]), key


@pytest.mark.parametrize('kwargs', [dict(begin_iter=1, begin_epoch=1), dict(begin_iter=-1),
                                    dict(begin_epoch=-2)])
def test_bad_begin_arguments_fail_early(kwargs):
    with pytest.raises(ValueError, match='begin_'):
        EMAHook(**kwargs)


def test_begin_epoch_after_the_end_fails_at_train(tmp_path):
    runner = toy_runner(tmp_path, max_=2, custom_hooks=[dict(type='EMAHook', begin_epoch=3)])
    with pytest.raises(ValueError, match='begin_epoch'):
        runner.train()
