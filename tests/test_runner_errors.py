"""Failures keep their identity and clean up, and bad input fails early with a named cause
(issue 8)."""
import logging

import pytest
import torch

from minimm.hooks import Hook
from toy import ToyModel, toy_loader, toy_runner


class _MyError(Exception):
    pass


class _Raises(Hook):
    def __init__(self, error):
        self.error = error

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        raise self.error


@pytest.mark.parametrize('error', [_MyError('boom'), TypeError('bad type'),
                                   KeyboardInterrupt()])
def test_a_hook_error_keeps_its_class_and_gains_a_note(tmp_path, error):
    runner = toy_runner(tmp_path, max_=1, val=False, custom_hooks=[_Raises(error)])
    with pytest.raises(type(error)) as info:
        runner.train()
    assert info.value is error
    assert [n.split(' (hook ')[0] for n in info.value.__notes__] == [
        'raised in _Raises.after_train_iter']


def test_log_file_and_visualizer_are_closed_when_training_fails(tmp_path):
    runner = toy_runner(tmp_path, max_=1, val=False, custom_hooks=[_Raises(_MyError())])
    closed = []
    close = runner.visualizer.close
    runner.visualizer.close = lambda: closed.append(close())
    file_handlers = [h for h in runner.logger.handlers if isinstance(h, logging.FileHandler)]
    assert file_handlers and all(h.stream is not None for h in file_handlers)
    with pytest.raises(_MyError):
        runner.train()
    assert closed == [None]
    assert all(h.stream is None for h in file_handlers)


def test_an_empty_train_dataloader_fails_before_training(tmp_path):
    runner = toy_runner(tmp_path, max_=1, val=False, train_dataloader=toy_loader(0, 4))
    with pytest.raises(ValueError, match='train_dataloader has no batches'):
        runner.train()


class _NoLossModel(ToyModel):
    def forward(self, inputs, data_samples=None, mode='tensor'):
        if mode == 'loss':
            return dict(ce=super().forward(inputs, data_samples, 'loss')['loss'])
        return super().forward(inputs, data_samples, mode)


class _OwnTrainStep(ToyModel):
    def train_step(self, data, optim_wrapper):
        log_vars = super().train_step(data, optim_wrapper)
        return dict(total=log_vars['loss'])


@pytest.mark.parametrize('model, message', [
    (_NoLossModel, r"returned no entry whose name contains 'loss' \(got keys \['ce'\]\)"),
    (_OwnTrainStep, r"train_step must return a dict with a 'loss' key.*keys \['total'\]")])
def test_a_missing_loss_is_named_at_the_first_iteration(tmp_path, model, message):
    runner = toy_runner(tmp_path, max_=1, val=False)
    torch.manual_seed(0)
    runner.model = model()
    with pytest.raises(KeyError, match=message):
        runner.train()


def test_a_save_best_key_the_evaluator_lacks_is_named_at_the_first_validation(tmp_path):
    runner = toy_runner(tmp_path, max_=2, default_hooks=dict(
        checkpoint=dict(type='CheckpointHook', interval=1, save_best='toy/accuracy',
                        rule='greater')))
    with pytest.raises(KeyError, match=r"save_best key\(s\) \['toy/accuracy'\].*"
                                       r"produced \['toy/acc'\]"):
        runner.train()
    assert runner.epoch == 1  # at the first validation


@pytest.mark.parametrize('train_cfg', [
    dict(by_epoch=True, max_epochs=2, max_iters=6), dict(by_epoch=False, max_epochs=2),
    dict(by_epoch=True), dict(by_epoch=False, max_iters=3, max_epochs=1)])
def test_max_epochs_and_max_iters_exactly_one_matching_by_epoch(tmp_path, train_cfg):
    from minimm.runner import Runner
    runner = Runner(model=ToyModel(), work_dir=str(tmp_path), train_dataloader=toy_loader(12, 4),
                    train_cfg=train_cfg,
                    optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)))
    with pytest.raises(KeyError, match='set exactly one of max_epochs and max_iters'):
        runner.train()
