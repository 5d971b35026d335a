"""Settings that cannot work, named at start in one line (issue 39): a ``by_epoch`` that cannot
fire in an iteration-based loop, ``load_from`` of the wrong type, a second ``--cfg-options``, a
config given to ``minimm plot``, a bad config given to ``plot-lr``, and a custom loop's own
``train_cfg`` keys (which only the loop reads)."""
import os.path as osp

import pytest

from minimm.cli import DEMO_CONFIG, command_line
from minimm.config import Config
from minimm.plot.lr import config_schedule
from minimm.registry import LOOPS
from minimm.runner import BaseLoop, Runner
from toy import ToyModel, toy_loader, toy_runner


def _iter_runner(tmp_path, **kwargs):
    return toy_runner(tmp_path, by_epoch=False, max_=6, val=False, **kwargs)


def _warnings(runner) -> list:
    with open(osp.join(runner.log_dir, f'{runner.timestamp}.log')) as f:
        return [line.split(' - WARNING - ')[1] for line in f if 'iteration-based' in line]


@pytest.mark.parametrize('scheduler, where', [
    (dict(type='MultiStepLR', milestones=[1]), 'param_scheduler.by_epoch=True'),
    ([dict(type='LinearLR', by_epoch=False, end=2),
      dict(type='MultiStepLR', by_epoch=True, milestones=[1])], 'param_scheduler[1].by_epoch=True')])
def test_an_epoch_scheduler_in_an_iteration_loop_is_named_at_start(tmp_path, scheduler, where):
    # A warning, not an error: MMEngine runs it (its own tests build such runners).
    runner = _iter_runner(tmp_path, param_scheduler=scheduler)
    warned = _warnings(runner)
    assert len(warned) == 1 and warned[0].startswith(
        f'{where} in an iteration-based train loop: it steps only after the last iteration')
    assert 'set by_epoch=False' in warned[0] and 'convert_to_iter_based=True' in warned[0]
    runner.train()
    assert runner.optim_wrapper.get_lr()['lr'] == [pytest.approx(0.1)]  # what it warned of


def test_iteration_schedulers_and_converted_ones_are_accepted(tmp_path):
    runner = _iter_runner(tmp_path, param_scheduler=[
        dict(type='LinearLR', by_epoch=False, end=2),
        dict(type='MultiStepLR', milestones=[1], end=2, convert_to_iter_based=True)])
    runner.train()
    # The converted scheduler stepped during training: the lr fell after the 3 iterations of
    # epoch 1 (12 samples, batches of 4), not only after the last iteration.
    assert runner.optim_wrapper.get_lr()['lr'] == [pytest.approx(0.01)]


def test_epoch_checkpoints_and_epoch_metric_steps_in_an_iteration_loop_are_warned(tmp_path):
    named = dict(checkpoint=dict(type='CheckpointHook', interval=1),
                 logger=dict(type='LoggerHook', interval=5))
    checkpoint, logger = sorted(_warnings(toy_runner(tmp_path, by_epoch=False, max_=6,
                                                     default_hooks=named)))
    assert checkpoint.startswith('default_hooks.checkpoint.by_epoch=True in an iteration-based '
                                 'train loop: no epoch ends before training does')
    assert 'set default_hooks.checkpoint.by_epoch=False' in checkpoint
    assert logger.startswith('default_hooks.logger.log_metric_by_epoch=True in an iteration-')
    set_right = toy_runner(tmp_path / 'b', by_epoch=False, max_=6, default_hooks=dict(
        checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=3),
        logger=dict(type='LoggerHook', log_metric_by_epoch=False)))
    assert _warnings(set_right) == []
    assert _warnings(toy_runner(tmp_path / 'c', by_epoch=True, max_=1,
                                default_hooks=named)) == []  # an epoch loop
    # The untouched defaults say nothing (every short demo would warn).
    assert _warnings(toy_runner(tmp_path / 'd', by_epoch=False, max_=6)) == []


def test_load_from_of_another_type_is_named_at_start(tmp_path):
    with pytest.raises(TypeError, match=r"^load_from=5: must be a checkpoint path \(a str\)"):
        toy_runner(tmp_path, load_from=5)


@LOOPS.register_module(force=True)
class AutoLengthLoop(BaseLoop):
    """A custom loop that reads ``max_epochs`` its own way ('auto' or None: one epoch)."""

    iter = max_iters = 0

    def __init__(self, runner, dataloader, max_epochs):
        super().__init__(runner, dataloader)
        self.max_epochs = 1 if max_epochs in ('auto', None) else max_epochs
        self.ran = False

    def run(self):
        self.ran = True


@pytest.mark.parametrize('max_epochs', ['auto', None])
def test_a_custom_loops_own_keys_are_left_to_it(tmp_path, max_epochs):
    runner = Runner(model=ToyModel(), work_dir=str(tmp_path), train_dataloader=toy_loader(),
                    train_cfg=dict(type='AutoLengthLoop', max_epochs=max_epochs),
                    optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)))
    runner.train()
    assert runner.train_loop.ran and runner.train_loop.max_epochs == 1


def _cli_error(argv, capsys) -> str:
    assert command_line(argv) == 1
    return capsys.readouterr().err.splitlines()[0]


def test_two_cfg_options_are_merged(tmp_path, capsys):
    # Both are bad: the first one named shows the first --cfg-options was kept (MMEngine merges).
    line = _cli_error(['train', DEMO_CONFIG, '--work-dir', str(tmp_path), '--cfg-options',
                       'train_cfg.max_epochs=two', '--cfg-options', 'train_cfg.val_interval=0'],
                      capsys)
    assert line == "minimm: error: train_cfg.max_epochs='two': must be an integer >= 0"


def test_plot_of_a_config_says_it_takes_a_work_dir(capsys):
    line = _cli_error(['plot', DEMO_CONFIG], capsys)
    assert line.startswith("minimm: error: minimm plot takes a run's work dir")
    assert line.endswith(f'without training: minimm plot-lr {DEMO_CONFIG}')


def test_plot_lr_runs_the_checks_train_runs(tmp_path, capsys):
    config = tmp_path / 'bad.py'
    config.write_text(f"_base_ = {DEMO_CONFIG!r}\nparam_scheduler = [dict(type='MultiStepLR', "
                      'by_epoch=True, milestones=1)]\n')
    expected = ('param_scheduler[0].milestones=1: must be a list or a tuple (an option of '
                'MultiStepLR)')
    with pytest.raises(ValueError) as info:
        config_schedule(Config.fromfile(str(config)), epoch_length=3)
    assert str(info.value) == expected
    assert _cli_error(['plot-lr', str(config)], capsys) == f'minimm: error: {expected}'
    assert _cli_error(['train', str(config), '--work-dir', str(tmp_path / 'w')],
                      capsys) == f'minimm: error: {expected}'
