"""RuntimeInfoHook: the MessageHub keys written at each stage, as in MMEngine 0.10."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import minimm
from minimm.hooks import RuntimeInfoHook
from minimm.logging import MessageHub
from minimm.registry import HOOKS


def make_runner(lr=None):
    dataset = SimpleNamespace(metainfo={'classes': ('neg', 'pos')})
    return SimpleNamespace(
        message_hub=MessageHub('runtime_info_test'), cfg={'seed': 7}, seed=7,
        experiment_name='exp', epoch=2, iter=20, max_epochs=5, max_iters=50,
        train_dataloader=SimpleNamespace(dataset=dataset),
        optim_wrapper=SimpleNamespace(get_lr=lambda: lr if lr is not None else {'lr': [0.1, 0.2]}))


def test_priority_and_registration():
    assert RuntimeInfoHook.priority == 'VERY_HIGH'
    assert HOOKS.get('RuntimeInfoHook') is RuntimeInfoHook


def test_before_run_and_train_keys():
    runner, hook = make_runner(), RuntimeInfoHook()
    hub = runner.message_hub
    hook.before_run(runner)
    assert hub.runtime_info == {'cfg': "seed = 7\n", 'seed': 7, 'experiment_name': 'exp',
                                'minimm_version': minimm.__version__}
    hook.before_train(runner)
    assert {k: hub.get_info(k) for k in ('loop_stage', 'epoch', 'iter', 'max_epochs',
                                         'max_iters', 'dataset_meta')} == {
        'loop_stage': 'train', 'epoch': 2, 'iter': 20, 'max_epochs': 5, 'max_iters': 50,
        'dataset_meta': {'classes': ('neg', 'pos')}}
    runner.epoch = 3
    hook.before_train_epoch(runner)
    assert hub.get_info('epoch') == 3
    hook.after_train(runner)
    assert 'loop_stage' not in hub.runtime_info


def test_train_iter_writes_iter_first_lr_and_outputs():
    runner, hook = make_runner(lr={'lr': [0.1, 0.2], 'generator.lr': [0.5]}), RuntimeInfoHook()
    hub = runner.message_hub
    hook.before_train_iter(runner, batch_idx=0)
    assert hub.get_info('iter') == 20
    assert hub.get_scalar('train/lr').current() == 0.1
    assert hub.get_scalar('train/generator.lr').current() == 0.5
    hook.after_train_iter(runner, batch_idx=0, outputs={'loss': torch.tensor(0.25), 'acc': 3})
    assert hub.get_scalar('train/loss').current() == 0.25
    assert hub.get_scalar('train/acc').current() == 3
    hook.after_train_iter(runner, batch_idx=1, outputs=None)
    assert len(hub.get_scalar('train/loss').data[0]) == 1


def test_lr_must_be_a_dict():
    runner = make_runner(lr=[0.1])
    with pytest.raises(TypeError, match='dict of learning rates'):
        RuntimeInfoHook().before_train_iter(runner, batch_idx=0)


def test_validation_inside_training_restores_train_stage_and_standalone_pops_it():
    runner, hook = make_runner(), RuntimeInfoHook()
    hub = runner.message_hub
    hook.before_train(runner)
    hook.before_val(runner)
    assert hub.get_info('loop_stage') == 'val'
    hook.after_val(runner)
    assert hub.get_info('loop_stage') == 'train'
    hook.after_train(runner)
    hook.before_val(runner)
    hook.after_val(runner)
    assert 'loop_stage' not in hub.runtime_info
    hook.before_test(runner)
    assert hub.get_info('loop_stage') == 'test'
    hook.after_test(runner)
    assert 'loop_stage' not in hub.runtime_info


def test_metrics_become_scalars_or_info():
    runner, hook = make_runner(), RuntimeInfoHook()
    hub = runner.message_hub
    confusion = np.eye(2)
    hook.after_val_epoch(runner, metrics={'accuracy/top1': 75.0, 'n': np.int64(3),
                                          'one': np.array([2.0]), 'confusion': confusion})
    assert hub.get_scalar('val/accuracy/top1').current() == 75.0
    assert hub.get_scalar('val/n').current() == 3
    assert hub.get_scalar('val/one').current() == 2.0
    assert hub.get_info('val/confusion') is confusion
    hook.after_test_epoch(runner, metrics={'accuracy/top1': torch.tensor(80.0)})
    assert hub.get_scalar('test/accuracy/top1').current() == 80.0
    hook.after_val_epoch(runner, metrics=None)
