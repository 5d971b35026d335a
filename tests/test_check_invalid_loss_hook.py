"""CheckInvalidLossHook: a NaN/inf loss stops training with an error naming iteration and value."""
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import DataLoader

from minimm.hooks import CheckInvalidLossHook
from toy import ToyDataset, toy_runner

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _loader_with_nan_in_batch(bad_batch):
    """Batches of 4 from 12 toy samples; every input of batch ``bad_batch`` is NaN."""
    dataset = ToyDataset(12)
    dataset.x[4 * bad_batch:4 * bad_batch + 4] = float('nan')
    return DataLoader(dataset, batch_size=4, shuffle=False)


def test_nan_loss_stops_training_after_the_step_was_applied(tmp_path):
    runner = toy_runner(tmp_path, val=False, train_dataloader=_loader_with_nan_in_batch(1),
                        custom_hooks=[CheckInvalidLossHook(interval=1)],
                        default_hooks=dict(checkpoint=None))
    with pytest.raises(FloatingPointError, match=r'the loss is nan at iteration 2 '
                                                 r'\(epoch 1, batch 1\)'):
        runner.train()
    # The hook runs after train_step: the NaN gradients have already reached the weights.
    assert torch.isnan(runner.model.linear.weight).all()
    assert runner.iter == 1          # the loop never finished iteration 2


def test_interval_skips_the_iterations_in_between(tmp_path):
    # The NaN comes at iteration 2; with interval=2 it is seen there, with interval=3 not
    # until iteration 3, whose loss is NaN too because the weights are.
    for interval, iteration in ((2, 2), (3, 3)):
        runner = toy_runner(tmp_path / str(interval), val=False,
                            train_dataloader=_loader_with_nan_in_batch(1),
                            custom_hooks=[CheckInvalidLossHook(interval=interval)],
                            default_hooks=dict(checkpoint=None))
        with pytest.raises(FloatingPointError, match=f'at iteration {iteration} '):
            runner.train()


def test_finite_losses_pass(tmp_path):
    runner = toy_runner(tmp_path, val=False, custom_hooks=[CheckInvalidLossHook(interval=1)],
                        default_hooks=dict(checkpoint=None))
    runner.train()
    assert runner.iter == 6


def _fake_runner(iter_=0, epoch=0):
    return SimpleNamespace(iter=iter_, epoch=epoch)


def test_infinity_and_missing_loss():
    hook = CheckInvalidLossHook(interval=1)
    with pytest.raises(FloatingPointError, match=r'the loss is inf at iteration 8 \(epoch 3'):
        hook.after_train_iter(_fake_runner(7, 2), 0, outputs=dict(loss=torch.tensor(float('inf'))))
    with pytest.raises(KeyError, match=r"outputs\['loss'\].*\['loss_cls'\]"):
        hook.after_train_iter(_fake_runner(), 0, outputs=dict(loss_cls=torch.tensor(1.0)))


@pytest.mark.parametrize('interval', [0, -1, 1.5, True, '50'])
def test_bad_interval_is_rejected(interval):
    with pytest.raises(ValueError, match='positive int'):
        CheckInvalidLossHook(interval=interval)


def test_the_check_survives_python_O():
    # An `assert` would vanish under -O; the hook must still raise there.
    code = ('import torch, types\n'
            'from minimm.hooks import CheckInvalidLossHook\n'
            'runner = types.SimpleNamespace(iter=0, epoch=0)\n'
            'try:\n'
            '    CheckInvalidLossHook(1).after_train_iter(runner, 0, '
            'outputs=dict(loss=torch.tensor(float("nan"))))\n'
            'except FloatingPointError:\n'
            '    print("raised")\n')
    path = os.pathsep.join(filter(None, [REPO, os.environ.get('PYTHONPATH')]))
    env = dict(os.environ, PYTHONPATH=path)
    result = subprocess.run([sys.executable, '-O', '-c', code], capture_output=True, text=True,
                            timeout=120, env=env)
    assert result.stdout.strip() == 'raised', result.stderr


def test_registered_with_its_default():
    from minimm.registry import HOOKS
    hook = HOOKS.build(dict(type='CheckInvalidLossHook'))
    assert hook.interval == 50 and hook.priority == 'NORMAL'
    assert hook.get_triggered_stages() == ['after_train_iter']
