"""HistoryBuffer statistics, MessageHub updates and instances, weights_only round-trip."""
import io
import logging

import numpy as np
import pytest
import torch

from minimm.logging import HistoryBuffer, MessageHub, MMLogger, print_log


def test_history_buffer_statistics_are_sum_of_values_over_sum_of_counts():
    buf = HistoryBuffer()
    for value, count in [(1.0, 1), (2.0, 1), (6.0, 2), (4.0, 1)]:
        buf.update(value, count)
    assert buf.mean() == pytest.approx(13.0 / 5)
    assert buf.mean(2) == pytest.approx(10.0 / 3)
    assert buf.max() == 6.0 and buf.max(1) == 4.0
    assert buf.min() == 1.0 and buf.min(2) == 4.0
    assert buf.current() == 4.0
    assert buf.statistics('mean', 2) == buf.mean(2)
    assert buf.statistics('current') == 4.0
    logs, counts = buf.data
    assert logs.tolist() == [1.0, 2.0, 6.0, 4.0] and counts.tolist() == [1, 1, 2, 1]


def test_history_buffer_keeps_max_length_and_rejects_bad_input():
    buf = HistoryBuffer([1, 2], [1, 1], max_length=3)
    buf.update(3)
    buf.update(4)
    assert buf.data[0].tolist() == [2, 3, 4]
    with pytest.warns(UserWarning, match='exceeds max_length'):
        assert HistoryBuffer([1, 2, 3], [1, 1, 1], max_length=2).data[0].tolist() == [2, 3]
    with pytest.raises(ValueError, match='same length'):
        HistoryBuffer([1], [])
    with pytest.raises(TypeError, match='int or float'):
        buf.update('1')
    with pytest.raises(KeyError, match='not a registered statistic'):
        buf.statistics('median')
    with pytest.raises(ValueError, match='empty'):
        HistoryBuffer().current()


def test_history_buffer_register_statistics():
    def last_two_sum(buffer):
        return buffer.data[0][-2:].sum()

    HistoryBuffer.register_statistics(last_two_sum)
    buf = HistoryBuffer([1.0, 2.0, 3.0], [1, 1, 1])
    assert buf.statistics('last_two_sum') == 5.0


def test_history_buffer_state_dict_rebuilds_it():
    buf = HistoryBuffer([0.5, 1.5], [1, 3], max_length=7)
    again = HistoryBuffer(**buf.state_dict())
    assert buf.state_dict() == {'log_history': [0.5, 1.5], 'count_history': [1, 3],
                                'max_length': 7}
    assert again.mean() == buf.mean() == pytest.approx(0.5)


def test_update_scalar_accepts_numbers_numpy_and_one_element_tensors():
    hub = MessageHub('scalars')
    hub.update_scalar('train/loss', 1)
    hub.update_scalar('train/loss', np.float32(2.0))
    hub.update_scalar('train/loss', np.array([3.0]))
    hub.update_scalar('train/loss', torch.tensor(4.0), count=2)
    logs, counts = hub.get_scalar('train/loss').data
    assert logs.tolist() == [1.0, 2.0, 3.0, 4.0] and counts.tolist() == [1, 1, 1, 2]
    with pytest.raises(ValueError, match='exactly one element'):
        hub.update_scalar('train/loss', torch.ones(2))
    with pytest.raises(TypeError, match='a scalar must be'):
        hub.update_scalar('train/loss', '5')
    with pytest.raises(TypeError, match='count'):
        hub.update_scalar('train/loss', 1.0, count=1.5)
    with pytest.raises(KeyError, match='train/acc is not found'):
        hub.get_scalar('train/acc')


def test_update_scalars_with_value_count_dicts():
    hub = MessageHub('dicts')
    hub.update_scalars({'a': 1.0, 'b': {'value': 6.0, 'count': 3}})
    assert hub.get_scalar('a').current() == 1.0
    assert hub.get_scalar('b').mean() == 2.0
    with pytest.raises(KeyError, match='value must be defined'):
        hub.update_scalars({'c': {'count': 1}})


def test_runtime_info_update_get_pop():
    hub = MessageHub('info')
    hub.update_info('epoch', 3)
    hub.update_info_dict({'iter': 7, 'loop_stage': 'train'})
    assert hub.get_info('epoch') == 3 and hub.get_info('missing', 'd') == 'd'
    assert list(hub.runtime_info) == ['epoch', 'iter', 'loop_stage']
    assert hub.pop_info('loop_stage') == 'train' and hub.pop_info('loop_stage', 0) == 0


def test_resumed_flag_cannot_change():
    hub = MessageHub('flags')
    hub.update_info('x', 1, resumed=False)
    with pytest.raises(AssertionError, match='resumed keys cannot be modified'):
        hub.update_info('x', 2, resumed=True)
    hub.update_scalar('y', 1.0)
    with pytest.raises(AssertionError, match='resumed keys cannot be modified'):
        hub.update_scalar('y', 2.0, resumed=False)


def test_get_instance_and_current_instance():
    first = MessageHub.get_instance('hub_a')
    second = MessageHub.get_instance('hub_b')
    assert MessageHub.get_current_instance() is second
    assert MessageHub.get_instance('hub_a') is first
    # As MMEngine: the current instance is the latest created; fetching by name does not change it.
    assert MessageHub.get_current_instance() is second
    assert first.instance_name == 'hub_a'
    with pytest.warns(UserWarning, match='already exists'):
        MessageHub.get_instance('hub_a', runtime_info={'x': 1})


def _weights_only_round_trip(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def test_state_dict_loads_with_weights_only_and_keeps_only_resumed_keys():
    hub = MessageHub('ckpt')
    hub.update_scalar('train/loss', 0.5)
    hub.update_scalar('train/loss', torch.tensor(1.5))
    hub.update_scalar('train/time', 0.1, resumed=False)
    hub.update_info('eta', np.float64(12.5))
    hub.update_info('keep_ckpt_ids', [1, 2])
    hub.update_info('dataset_meta', {'classes': ('neg', 'pos')})
    hub.update_info('best', torch.tensor(3.0))
    hub.update_info('iter', 4, resumed=False)

    state = _weights_only_round_trip(hub.state_dict())
    assert state['log_scalars'] == {'train/loss': {'log_history': [0.5, 1.5],
                                                   'count_history': [1, 1],
                                                   'max_length': 1000000}}
    assert set(state['runtime_info']) == {'eta', 'keep_ckpt_ids', 'dataset_meta', 'best'}
    assert type(state['runtime_info']['eta']) is float

    resumed = MessageHub('resumed')
    resumed.load_state_dict(state)
    assert resumed.get_scalar('train/loss').mean() == 1.0
    assert resumed.get_info('dataset_meta') == {'classes': ('neg', 'pos')}
    assert resumed.get_info('best').item() == 3.0
    # The flags came back, so the next state_dict is the same.
    assert _weights_only_round_trip(resumed.state_dict())['log_scalars'] == state['log_scalars']


def test_state_dict_drops_values_weights_only_cannot_load(capsys):
    MMLogger.get_instance('hub_test_logger')
    hub = MessageHub('unsafe')
    hub.update_info('cfg_object', object())
    hub.update_info('seed', 0)
    state = hub.state_dict()
    assert 'cfg_object' not in state['runtime_info']
    assert 'cfg_object' not in state['resumed_keys']
    assert "runtime info 'cfg_object'" in capsys.readouterr().out
    _weights_only_round_trip(state)


def test_load_state_dict_accepts_mmengine_form_and_validates():
    hub = MessageHub('mmengine_form')
    hub.load_state_dict({'log_scalars': {'train/loss': HistoryBuffer([2.0], [1])},
                         'runtime_info': {'epoch': 1},
                         'resumed_keys': {'train/loss': True, 'epoch': True}})
    assert hub.get_scalar('train/loss').current() == 2.0 and hub.get_info('epoch') == 1
    with pytest.raises(KeyError, match='resumed_keys'):
        hub.load_state_dict({'log_scalars': {}, 'runtime_info': {}})


def test_print_log_targets(capsys, tmp_path):
    logger = MMLogger.get_instance('print_log_test', logger_name='demo',
                                   log_file=str(tmp_path / 'sub' / 'run.log'))
    print_log('plain')
    print_log('to logger', logger=logger)
    print_log('by name', logger='print_log_test', level=logging.WARNING)
    print_log('dropped', logger='silent')
    print_log('debug is below INFO', logger=logger, level=logging.DEBUG)
    out = capsys.readouterr().out
    assert out.startswith('plain\n')
    assert ' - demo - INFO - to logger\n' in out and ' - demo - WARNING - by name\n' in out
    assert 'dropped' not in out and 'debug' not in out
    text = (tmp_path / 'sub' / 'run.log').read_text()
    assert text.count('\n') == 2 and ' - demo - INFO - to logger' in text
    with pytest.raises(ValueError, match='has not been created'):
        print_log('x', logger='no_such_logger')
    with pytest.raises(TypeError):
        print_log('x', logger=3)
    assert MMLogger.get_current_instance() is logger


def test_print_log_by_name_does_not_change_the_current_logger(capsys):
    MMLogger.get_instance('current_test_older', logger_name='older')
    latest = MMLogger.get_instance('current_test_latest', logger_name='latest')
    print_log('by name', logger='current_test_older')
    print_log('to the current logger', logger='current')
    out = capsys.readouterr().out
    assert ' - older - INFO - by name\n' in out
    assert ' - latest - INFO - to the current logger\n' in out
    assert MMLogger.get_current_instance() is latest


@pytest.mark.parametrize('kind', ['float', 'int', 'mixed'])
def test_history_mean_equals_numpys_to_the_last_bit(kind):
    # numpy's own sum is the oracle: MMEngine's mean is `logs.sum() / counts.sum()` on arrays,
    # and a Python left-to-right sum differs from it in the last bit about one time in three.
    rng = np.random.default_rng(0)
    for length in list(range(0, 40)) + [63, 64, 65, 127, 128, 129, 300]:
        values = (rng.standard_normal(length) * 10.0 ** rng.integers(-6, 6, length)).tolist()
        if kind != 'float':
            ints = rng.integers(-1000, 1000, length).tolist()
            values = ints if kind == 'int' else [v if i % 2 else n
                                                 for i, (v, n) in enumerate(zip(values, ints))]
        counts = rng.integers(1, 4, length).tolist()
        buffer = HistoryBuffer(values, counts)
        for window in (None, 1, 7, 8, 10, 17, 128, 129, 1000):
            last = slice(None) if window is None else slice(-window, None)
            with np.errstate(invalid='ignore'):
                expected = np.array(values[last]).sum() / np.array(counts[last]).sum()
                got = buffer.mean(window)
            assert type(got) is type(expected)
            assert got == expected or (np.isnan(got) and np.isnan(expected)), (length, window)


@pytest.mark.parametrize('initial', [[], [3], [2.5]])
def test_history_values_take_the_type_a_numpy_array_would_give_them(initial):
    # MMEngine keeps the history in an array grown by np.append: np.append is the oracle. An
    # empty array is float64, so ints logged into an empty buffer come back as floats.
    updates = [4, 7, 1.5, 2]
    buffer = HistoryBuffer(initial, [1] * len(initial))
    array = np.array(initial)
    for value in updates:
        buffer.update(value)
        array = np.append(array, value)
        for got, expected in ((buffer.current(), array[-1]), (buffer.max(), array.max()),
                              (buffer.min(2), array[-2:].min())):
            assert type(got) is type(expected) and got == expected
    restored = HistoryBuffer(**buffer.state_dict())
    assert type(restored.current()) is type(buffer.current())
