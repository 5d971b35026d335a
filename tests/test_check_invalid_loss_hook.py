"""CheckInvalidLossHook, twice.

* The classic MMEngine article's hook, its code run as written (imports changed to minimm's):
  it registers in minimm's root ``HOOKS``, which has no hook of that name (MMEngine has none).
* minidet's (``tutorials/minidet``, the example downstream package, where MMDetection keeps its
  own): a NaN/inf loss stops training with an error naming the iteration and the value.
"""
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import DataLoader

from toy import ToyDataset, toy_runner

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MINIDET = os.path.join(REPO, 'tutorials', 'minidet')
if MINIDET not in sys.path:
    sys.path.insert(0, MINIDET)

from minidet.engine.hooks import CheckInvalidLossHook  # noqa: E402

# The article's hook, verbatim but for its imports (and its docstring, left out).
ARTICLE_HOOK = """
import torch
from minimm.hooks import Hook
from minimm.registry import HOOKS


@HOOKS.register_module()
class CheckInvalidLossHook(Hook):
{class_priority}
    def __init__(self, interval=50):
        self.interval = interval

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        if self.every_n_train_iters(runner, self.interval):
            assert torch.isfinite(outputs['loss']), \\
                runner.logger.info('loss become infinite or NaN!')
"""

# Runs the article's hook for 60 iterations of the toy model, with finite data and with NaN
# inputs from the start, and reports what happened as JSON.
DRIVER = """
import json, sys
from torch.utils.data import DataLoader
from minimm.runner import Runner
from toy import ToyDataset, toy_runner

def run(work_dir, nan):
    dataset = ToyDataset(240)
    if nan:
        dataset.x[:] = float('nan')
    runner = toy_runner(work_dir, val=False, max_=1, custom_hooks=[HOOK_CFG],
                        train_dataloader=DataLoader(dataset, batch_size=4),
                        default_hooks=dict(checkpoint=None))
    order = [type(h).__name__ for h in runner.hooks]
    try:
        runner.train()
        error = None
    except AssertionError as e:
        error = type(e).__name__
    return dict(order=order, priority=str(runner.hooks[order.index('CheckInvalidLossHook')].priority),
                iter=runner.iter, error=error)

print(json.dumps(dict(finite=run(sys.argv[1] + '/finite', False), nan=run(sys.argv[1] + '/nan', True))))
"""


def _run_article_hook(tmp_path, class_priority, hook_cfg):
    code = (ARTICLE_HOOK.format(class_priority=class_priority)
            + f'HOOK_CFG = {hook_cfg!r}\n' + DRIVER)
    paths = [REPO, os.path.join(REPO, 'tests'), os.environ.get('PYTHONPATH')]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, paths)))
    result = subprocess.run([sys.executable, '-c', code, str(tmp_path)], capture_output=True,
                            text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1]), result.stdout + result.stderr


@pytest.mark.parametrize('class_priority, hook_cfg', [
    ('', dict(type='CheckInvalidLossHook', interval=50, priority='ABOVE_NORMAL')),
    ("    priority = 'ABOVE_NORMAL'\n", dict(type='CheckInvalidLossHook', interval=50)),
], ids=['priority-in-custom_hooks', 'priority-as-class-attribute'])
def test_the_article_hook_runs_as_written(tmp_path, class_priority, hook_cfg):
    report, log = _run_article_hook(tmp_path, class_priority, hook_cfg)
    finite, nan = report['finite'], report['nan']
    # ABOVE_NORMAL (40): after RuntimeInfoHook (VERY_HIGH), before IterTimerHook (NORMAL).
    assert finite['priority'] == 'ABOVE_NORMAL'
    assert finite['order'][:3] == ['RuntimeInfoHook', 'CheckInvalidLossHook', 'IterTimerHook']
    assert finite['error'] is None and finite['iter'] == 60
    # NaN from the first batch: the check fires at its first turn, iteration 50.
    assert nan['error'] == 'AssertionError' and nan['iter'] == 49
    assert log.count('loss become infinite or NaN!') == 1


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
            'from minidet.engine.hooks import CheckInvalidLossHook\n'
            'runner = types.SimpleNamespace(iter=0, epoch=0)\n'
            'try:\n'
            '    CheckInvalidLossHook(1).after_train_iter(runner, 0, '
            'outputs=dict(loss=torch.tensor(float("nan"))))\n'
            'except FloatingPointError:\n'
            '    print("raised")\n')
    path = os.pathsep.join(filter(None, [REPO, MINIDET, os.environ.get('PYTHONPATH')]))
    env = dict(os.environ, PYTHONPATH=path)
    result = subprocess.run([sys.executable, '-O', '-c', code], capture_output=True, text=True,
                            timeout=120, env=env)
    assert result.stdout.strip() == 'raised', result.stderr


def test_registered_in_minidet_with_its_default():
    from minimm.registry import HOOKS
    # From minimm's root registry, minidet's hook is named with its scope.
    hook = HOOKS.build(dict(type='minidet.CheckInvalidLossHook'))
    assert type(hook) is CheckInvalidLossHook and hook.interval == 50
    assert hook.priority == 'NORMAL' and hook.get_triggered_stages() == ['after_train_iter']
    assert 'CheckInvalidLossHook' not in HOOKS.module_dict
