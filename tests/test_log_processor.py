"""LogProcessor: MMEngine 0.10's exact log lines and tags, from a hand-filled MessageHub."""
from types import SimpleNamespace

import pytest
import torch

from minimm.logging import LogProcessor, MessageHub


@pytest.fixture(autouse=True)
def no_cuda(monkeypatch):
    # The `memory: N` field appears only on CUDA machines; the expected lines here are CPU ones.
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)


def make_runner(epoch=0, iter=9, max_epochs=5, max_iters=500, train_len=100, val_len=10,
                test_len=10, train_loop=True):
    loop = SimpleNamespace(dataloader=range(train_len)) if train_loop else None
    return SimpleNamespace(
        message_hub=MessageHub('log_processor_test'), epoch=epoch, iter=iter,
        max_epochs=max_epochs, max_iters=max_iters, train_loop_built=train_loop, train_loop=loop,
        val_loop=SimpleNamespace(dataloader=range(val_len)),
        test_loop=SimpleNamespace(dataloader=range(test_len)), model=None)


def fill_train(hub, n=10):
    """n iterations as the hooks would log them: lr, data_time, loss, time; eta = 12.7 s."""
    for i in range(n):
        hub.update_scalar('train/lr', 0.01 * (i + 1))
        hub.update_scalar('train/data_time', 0.001 * (i + 1))
        hub.update_scalar('train/loss', float(i + 1))
        hub.update_scalar('train/time', 0.01 * (i + 1))
    hub.update_info('eta', 12.7)


def test_train_line_by_epoch_with_mean_over_window():
    runner = make_runner()
    fill_train(runner.message_hub, n=12)
    tag, log_str = LogProcessor().get_log_after_iter(runner, batch_idx=9, mode='train')
    # Window of the last 10 of 12 updates: loss 3..12 -> 7.5, time 0.03..0.12 -> 0.075.
    assert log_str == ('Epoch(train) [1][ 10/100]  lr: 1.2000e-01  eta: 0:00:12  time: 0.0750  '
                       'data_time: 0.0075  loss: 7.5000')
    assert list(tag) == ['lr', 'data_time', 'loss', 'time', 'epoch', 'iter']
    assert tag['lr'] == pytest.approx(0.12) and tag['loss'] == pytest.approx(7.5)
    assert tag['epoch'] == 1 and tag['iter'] == 10


def test_epoch_and_iter_are_right_aligned_to_max_epochs_and_loader_length():
    runner = make_runner(epoch=2, iter=2 * 1000 + 4, max_epochs=12, train_len=1000)
    fill_train(runner.message_hub, n=1)
    _, log_str = LogProcessor().get_log_after_iter(runner, batch_idx=4, mode='train')
    assert log_str.startswith('Epoch(train)  [3][   5/1000]  lr: 1.0000e-02  eta: 0:00:12  ')


def test_train_line_by_iter():
    runner = make_runner(iter=9, max_iters=1000)
    fill_train(runner.message_hub)
    tag, log_str = LogProcessor(by_epoch=False).get_log_after_iter(runner, 9, 'train')
    assert log_str == ('Iter(train) [  10/1000]  lr: 1.0000e-01  eta: 0:00:12  time: 0.0550  '
                       'data_time: 0.0055  loss: 5.5000')
    assert 'epoch' not in tag and tag['iter'] == 10


def test_without_timer_there_is_no_eta_and_other_keys_follow_lr():
    runner = make_runner()
    hub = runner.message_hub
    hub.update_scalar('train/lr', 0.1)
    hub.update_scalar('train/loss', 0.25)
    hub.update_scalar('train/acc', 3)
    _, log_str = LogProcessor(num_digits=2).get_log_after_iter(runner, 9, 'train')
    # An int scalar prints as an int (the latest value of a non-mean key).
    assert log_str == 'Epoch(train) [1][ 10/100]  lr: 1.00e-01  loss: 0.25  acc: 3'


def test_val_iter_line_prints_timing_but_no_metrics():
    runner = make_runner(epoch=1)
    hub = runner.message_hub
    hub.update_scalar('val/data_time', 0.002)
    hub.update_scalar('val/time', 0.004)
    hub.update_scalar('val/accuracy/top1', 50.0)
    hub.update_info('eta', 3.9)
    tag, log_str = LogProcessor().get_log_after_iter(runner, batch_idx=4, mode='val')
    assert log_str == 'Epoch(val) [1][ 5/10]    eta: 0:00:03  time: 0.0040  data_time: 0.0020  '
    assert tag['epoch'] == 1 and tag['iter'] == 10


def test_test_iter_line():
    runner = make_runner()
    hub = runner.message_hub
    hub.update_scalar('test/data_time', 0.002)
    hub.update_scalar('test/time', 0.004)
    hub.update_info('eta', 61)
    _, log_str = LogProcessor().get_log_after_iter(runner, batch_idx=9, mode='test')
    assert log_str == 'Epoch(test) [10/10]    eta: 0:01:01  time: 0.0040  data_time: 0.0020  '
    _, log_str = LogProcessor(by_epoch=False).get_log_after_iter(runner, batch_idx=4, mode='test')
    assert log_str.startswith('Iter(test) [ 5/10]    eta: 0:01:01')


def test_val_epoch_line_averages_timing_over_the_whole_epoch():
    runner = make_runner(epoch=1, val_len=4)
    hub = runner.message_hub
    for t in (0.001, 0.002, 0.003, 0.006):
        hub.update_scalar('val/data_time', t)
        hub.update_scalar('val/time', 10 * t)
    hub.update_scalar('val/accuracy/top1', 90.0)
    tag, log_str = LogProcessor(window_size=2).get_log_after_epoch(runner, 4, 'val')
    assert log_str == ('Epoch(val) [1][4/4]    accuracy/top1: 90.0000  data_time: 0.0030  '
                       'time: 0.0300')
    assert list(tag) == ['accuracy/top1', 'data_time', 'time']
    assert tag['time'] == pytest.approx(0.03)


def test_val_only_and_test_epoch_lines():
    runner = make_runner(train_loop=False, val_len=3, test_len=3)
    hub = runner.message_hub
    hub.update_scalar('val/accuracy/top1', 75.0)
    hub.update_scalar('test/accuracy/top1', 80.0)
    hub.update_info('test/confusion', [[1, 0], [0, 1]])
    _, log_str = LogProcessor().get_log_after_epoch(runner, 3, 'val')
    assert log_str == 'Epoch(val) [0][3/3]    accuracy/top1: 75.0000'
    tag, log_str = LogProcessor().get_log_after_epoch(runner, 3, 'test', with_non_scalar=True)
    assert log_str == 'Epoch(test) [3/3]    accuracy/top1: 80.0000  confusion: [[1, 0], [0, 1]]'
    assert tag == {'accuracy/top1': 80.0, 'confusion': [[1, 0], [0, 1]]}
    # Non-scalars are always printed; with_non_scalar only decides whether the tag has them.
    tag, log_str = LogProcessor(by_epoch=False).get_log_after_epoch(runner, 3, 'test')
    assert log_str == 'Iter(test) [3/3]    accuracy/top1: 80.0000  confusion: [[1, 0], [0, 1]]'
    assert tag == {'accuracy/top1': 80.0}


def test_log_with_hierarchy_keeps_prefixes_in_tag_only():
    runner = make_runner()
    fill_train(runner.message_hub)
    tag, log_str = LogProcessor(log_with_hierarchy=True).get_log_after_iter(runner, 9, 'train')
    assert list(tag) == ['train/lr', 'train/data_time', 'train/loss', 'train/time', 'epoch',
                         'iter']
    assert 'lr: 1.0000e-01' in log_str and 'train/' not in log_str


def test_custom_cfg_statistics_and_windows():
    runner = make_runner(iter=14)
    fill_train(runner.message_hub, n=15)
    custom_cfg = [dict(data_src='loss', method_name='mean', window_size='global',
                       log_name='loss_global'),
                  dict(data_src='loss', method_name='max', window_size='epoch',
                       log_name='loss_epoch_max'),
                  dict(data_src='time', method_name='current')]
    tag, log_str = LogProcessor(custom_cfg=custom_cfg).get_log_after_iter(runner, 4, 'train')
    assert tag['loss_global'] == pytest.approx(8.0)  # mean of 1..15
    assert tag['loss_epoch_max'] == 15.0             # last 5 updates
    assert tag['time'] == pytest.approx(0.15)         # overridden: latest, not windowed mean
    assert log_str.endswith('loss: 10.5000  loss_global: 8.0000  loss_epoch_max: 15.0000')


def test_custom_cfg_is_validated():
    with pytest.raises(ValueError, match='duplicate loss'):
        LogProcessor(custom_cfg=[dict(data_src='loss', method_name='mean'),
                                 dict(data_src='loss', method_name='max')])
    with pytest.raises(ValueError, match='epoch'):
        LogProcessor(by_epoch=False,
                     custom_cfg=[dict(data_src='loss', method_name='mean', window_size='epoch')])
    with pytest.raises(KeyError, match='method_name'):
        LogProcessor(custom_cfg=[dict(data_src='loss')])
    runner = make_runner()
    fill_train(runner.message_hub)
    processor = LogProcessor(custom_cfg=[dict(data_src='loss', method_name='mean',
                                              window_size='week', log_name='l')])
    with pytest.raises(TypeError, match='week'):
        processor.get_log_after_iter(runner, 0, 'train')
    with pytest.raises(ValueError, match='mode'):
        processor.get_log_after_iter(runner, 0, 'predict')
