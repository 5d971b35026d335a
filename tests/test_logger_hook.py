"""LoggerHook: when it logs, what reaches the logger, the JSON files and out_dir; vis backends."""
import json
import os
from types import SimpleNamespace

import pytest
import torch

from minimm.hooks import LoggerHook
from minimm.logging import (LocalVisBackend, LogProcessor, MessageHub, TensorboardVisBackend,
                            Visualizer)
from minimm.registry import HOOKS, VISBACKENDS


@pytest.fixture(autouse=True)
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)


class ListLogger:
    def __init__(self):
        self.lines = []

    def info(self, msg, extra=None):  # extra: as logging.Logger.info takes it
        self.lines.append(msg)


def make_runner(tmp_path, train_len=25, max_epochs=2, train_loop=True):
    log_dir = tmp_path / 'work' / '20260101_000000'
    log_dir.mkdir(parents=True)
    loop = SimpleNamespace(dataloader=range(train_len)) if train_loop else None
    runner = SimpleNamespace(
        message_hub=MessageHub('logger_hook_test'), logger=ListLogger(),
        log_processor=LogProcessor(),
        visualizer=Visualizer('logger_hook_vis', vis_backends=[dict(type='LocalVisBackend')],
                              save_dir=str(log_dir)),
        work_dir=str(tmp_path / 'work'), log_dir=str(log_dir), timestamp='20260101_000000',
        experiment_name='exp', epoch=0, iter=0, max_epochs=max_epochs,
        max_iters=max_epochs * train_len, train_loop_built=train_loop, train_loop=loop,
        train_dataloader=range(train_len), val_loop=SimpleNamespace(dataloader=range(3)),
        val_dataloader=range(3), test_loop=SimpleNamespace(dataloader=range(3)),
        test_dataloader=range(3))
    return runner


def read_json_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def run_epoch(hook, runner, train_len):
    """One training epoch's after_train_iter calls; loss = iteration number."""
    logged = []
    for batch_idx in range(train_len):
        runner.message_hub.update_scalar('train/loss', float(runner.iter))
        before = len(runner.logger.lines)
        hook.after_train_iter(runner, batch_idx)
        if any(line.startswith('Epoch(train)') for line in runner.logger.lines[before:]):
            logged.append(batch_idx)
        runner.iter += 1
    return logged


@pytest.mark.parametrize('train_len,ignore_last,expected', [
    (25, True, [9, 19]),
    (25, False, [9, 19, 24]),
    (5, True, [4]),        # epoch shorter than interval: log at its end (mmengine#935)
    (10, True, [9]),
])
def test_train_interval_logic(tmp_path, train_len, ignore_last, expected):
    runner = make_runner(tmp_path, train_len=train_len)
    hook = LoggerHook(interval=10, ignore_last=ignore_last)
    hook.before_run(runner)
    assert run_epoch(hook, runner, train_len) == expected


def test_train_interval_counts_within_each_epoch(tmp_path):
    # 5 batches, interval 2: batches 1 and 3 of every epoch. Counting the global iteration
    # instead would log batches 0 and 2 in the second epoch (iterations 5 and 7).
    runner = make_runner(tmp_path, train_len=5)
    hook = LoggerHook(interval=2)
    hook.before_run(runner)
    assert run_epoch(hook, runner, 5) == [1, 3]
    runner.epoch += 1
    assert run_epoch(hook, runner, 5) == [1, 3]


def test_train_lines_and_json_logs(tmp_path):
    runner = make_runner(tmp_path, train_len=25)
    hook = LoggerHook(interval=10, interval_exp_name=20)
    hook.before_run(runner)
    assert hook.json_log_path == '20260101_000000.json'
    run_epoch(hook, runner, 25)
    # No lr and no timer here: the empty lr field still leaves its two spaces, as in MMEngine.
    assert runner.logger.lines == [
        'Epoch(train) [1][10/25]    loss: 4.5000',
        'Exp name: exp',   # iteration 20 (every_n_train_iters), before that iteration's line
        'Epoch(train) [1][20/25]    loss: 14.5000',
        'Exp name: exp',   # end of epoch
    ]
    vis_dir = os.path.join(runner.log_dir, 'vis_data')
    expected = [{'loss': 4.5, 'epoch': 1, 'iter': 10, 'step': 10},
                {'loss': 14.5, 'epoch': 1, 'iter': 20, 'step': 20}]
    assert read_json_lines(os.path.join(vis_dir, 'scalars.json')) == expected
    assert read_json_lines(os.path.join(vis_dir, '20260101_000000.json')) == expected


@pytest.mark.parametrize('by_epoch,step', [(True, 1), (False, 25)])
def test_val_epoch_step_is_epoch_or_iter(tmp_path, by_epoch, step):
    runner = make_runner(tmp_path)
    runner.epoch, runner.iter = 1, 25
    runner.message_hub.update_scalar('val/accuracy/top1', 50.0)
    hook = LoggerHook(log_metric_by_epoch=by_epoch)
    hook.before_run(runner)
    hook.after_val_epoch(runner, metrics={'accuracy/top1': 50.0})
    assert runner.logger.lines == ['Epoch(val) [1][3/3]    accuracy/top1: 50.0000']
    path = os.path.join(runner.log_dir, 'vis_data', '20260101_000000.json')
    assert read_json_lines(path) == [{'accuracy/top1': 50.0, 'step': step}]


def test_val_only_logs_step_zero_and_iter_lines(tmp_path):
    runner = make_runner(tmp_path, train_loop=False)
    hub = runner.message_hub
    hook = LoggerHook(interval=2)
    hook.before_run(runner)
    for batch_idx in range(3):
        hub.update_scalar('val/data_time', 0.5)
        hub.update_scalar('val/time', 1.0)
        hub.update_info('eta', 2 - batch_idx)
        hook.after_val_iter(runner, batch_idx)
    hub.update_scalar('val/accuracy/top1', 50.0)
    hook.after_val_epoch(runner)
    # Without a train loop MMEngine does not pad the epoch, so no space after "Epoch(val)".
    assert runner.logger.lines == [
        'Epoch(val)[0][2/3]    eta: 0:00:01  time: 1.0000  data_time: 0.5000  ',
        'Epoch(val) [0][3/3]    accuracy/top1: 50.0000  data_time: 0.5000  time: 1.0000']
    path = os.path.join(runner.log_dir, 'vis_data', 'scalars.json')
    assert read_json_lines(path) == [{'accuracy/top1': 50.0, 'data_time': 0.5, 'time': 1.0,
                                      'step': 0}]


def test_test_epoch_dumps_tags_to_log_dir(tmp_path):
    runner = make_runner(tmp_path)
    runner.message_hub.update_scalar('test/accuracy/top1', 80.0)
    runner.message_hub.update_info('test/confusion', torch.eye(2))
    hook = LoggerHook(interval=1)
    hook.before_run(runner)
    hook.after_test_iter(runner, 0)
    hook.after_test_epoch(runner)
    assert runner.logger.lines[0] == 'Epoch(test) [1/3]    '
    with open(os.path.join(runner.log_dir, '20260101_000000.json')) as f:
        assert json.load(f) == {'accuracy/top1': 80.0, 'confusion': [[1.0, 0.0], [0.0, 1.0]]}


def test_after_run_copies_logs_to_out_dir(tmp_path):
    runner = make_runner(tmp_path)
    with open(os.path.join(runner.log_dir, '20260101_000000.log'), 'w') as f:
        f.write('text log\n')
    with open(os.path.join(runner.log_dir, 'weights.pth'), 'w') as f:
        f.write('not a log')
    hook = LoggerHook(out_dir=str(tmp_path / 'out'), keep_local=False)
    hook.before_run(runner)
    runner.visualizer.add_scalars({'loss': 1.0}, step=1)
    hook.after_run(runner)
    out = tmp_path / 'out' / 'work'
    assert hook.out_dir == str(out)
    assert (out / '20260101_000000.log').read_text() == 'text log\n'
    assert read_json_lines(out / 'vis_data' / 'scalars.json') == [{'loss': 1.0, 'step': 1}]
    assert not (out / 'weights.pth').exists()
    assert not os.path.exists(os.path.join(runner.log_dir, '20260101_000000.log'))
    assert os.path.exists(os.path.join(runner.log_dir, 'weights.pth'))


def test_arguments_are_validated():
    assert LoggerHook.priority == 'BELOW_NORMAL' and HOOKS.get('LoggerHook') is LoggerHook
    with pytest.raises(TypeError, match='interval must be an integer'):
        LoggerHook(interval=1.5)
    with pytest.raises(ValueError, match='greater than 0'):
        LoggerHook(interval=0)
    with pytest.raises(TypeError, match='ignore_last'):
        LoggerHook(ignore_last=1)
    with pytest.raises(TypeError, match='out_suffix'):
        LoggerHook(out_suffix=('.log', 3))
    with pytest.raises(ValueError, match='local folders only'):
        LoggerHook(out_dir='x', backend_args={})


def test_visualizer_backends(tmp_path):
    vis = Visualizer('vis_backends_test', vis_backends=[dict(type='LocalVisBackend'),
                                                        dict(type='LocalVisBackend', name='copy',
                                                             scalar_save_file='other.json')],
                     save_dir=str(tmp_path))
    vis.add_scalar('lr', torch.tensor(0.5), step=3)
    vis.add_config({'lr': 0.5, 'name': 'x'})
    vis.close()
    assert read_json_lines(tmp_path / 'vis_data' / 'scalars.json') == [{'lr': 0.5, 'step': 3}]
    assert read_json_lines(tmp_path / 'vis_data' / 'other.json') == [{'lr': 0.5, 'step': 3}]
    assert (tmp_path / 'vis_data' / 'config.py').read_text() == "lr = 0.5\nname = 'x'\n"
    assert isinstance(vis.get_backend('LocalVisBackend'), LocalVisBackend)
    with pytest.raises(RuntimeError, match='both named'):
        Visualizer('dup', vis_backends=[dict(type='LocalVisBackend')] * 2, save_dir=str(tmp_path))
    with pytest.raises(ValueError, match='scalar_save_file itself'):
        vis.get_backend('LocalVisBackend').add_scalars({'a': 1}, file_path='scalars.json')
    with pytest.warns(UserWarning, match='save_dir is None'):
        assert Visualizer('nodir', vis_backends=[dict(type='LocalVisBackend')]).get_backend(
            'LocalVisBackend') is None
    assert VISBACKENDS.get('TensorboardVisBackend') is TensorboardVisBackend


def test_json_lines_hold_plain_data_and_refuse_an_object(tmp_path):
    # The one converter (minimm/plain_data.py, for_json=True) behind every JSON file written.
    import numpy as np
    backend = LocalVisBackend(str(tmp_path))
    backend.add_scalars({'a': np.float32(0.5), 'b': torch.tensor([1, 2]), 'c': (1, np.int64(2)),
                         'd': {3}, 'e': np.arange(2)}, step=1)
    with pytest.raises(TypeError, match=r"scalars\['bad'\] is a builtins.object, which JSON"):
        backend.add_scalars({'bad': object()}, step=2)
    backend.close()
    assert read_json_lines(tmp_path / 'scalars.json') == [
        {'a': 0.5, 'b': [1, 2], 'c': [1, 2], 'd': [3], 'e': [0, 1], 'step': 1}]


def test_tensorboard_backend_is_lazy_and_names_the_missing_package(tmp_path):
    backend = TensorboardVisBackend(str(tmp_path / 'tb'))
    assert not (tmp_path / 'tb').exists()
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match='pip install tensorboard'):
            backend.add_scalar('loss', 1.0)
    else:
        backend.add_scalars({'loss': 1.0}, step=1)
        backend.close()
        assert os.listdir(tmp_path / 'tb')
