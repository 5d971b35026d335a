"""A HistoryBuffer (and so the MessageHub) keeps the tensors it is given and reads them all at
once when something asks. The oracle: a twin buffer given each tensor's ``.item()`` at once (what
MMEngine stores); every accessor must agree with it to the last bit, and each read of pending
tensors must be one transfer per dtype and device."""
import copy
import pickle

import numpy as np
import pytest
import torch

from minimm.logging import HistoryBuffer, MessageHub
from minimm.logging.pending_reads import READ_AFTER
from minimm.runner.device_reads import DeviceReads

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int32, torch.int64,
          torch.uint8, torch.bool]


def _values(dtype, n=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return [v.to(dtype) for v in torch.randn(n, generator=g, dtype=torch.float64) * 1e3]
    return [v.to(dtype) for v in torch.randint(0, 200, (n,), generator=g)]


def _twins(values, counts=None, **kwargs):
    counts = counts or [1] * len(values)
    lazy, eager = HistoryBuffer(**kwargs), HistoryBuffer(**kwargs)
    for value, count in zip(values, counts):
        lazy.update(value, count)
        eager.update(value.item() if isinstance(value, torch.Tensor) else value, count)
    return lazy, eager


def _same(a, b):
    """Equal values of the same type, to the bit (NaN equal to NaN)."""
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and all(map(_same, a.tolist(), b.tolist()))
    return type(a) is type(b) and (a == b or (a != a and b != b))


@pytest.mark.parametrize('dtype', DTYPES, ids=str)
def test_every_accessor_gives_the_eager_twins_values(dtype):
    for accessor in (lambda b: b.mean(), lambda b: b.mean(3), lambda b: b.max(), lambda b: b.min(4),
                     lambda b: b.current(), lambda b: b.statistics('mean', 5),
                     lambda b: b.data[0], lambda b: b.data[1],
                     lambda b: np.array(b.state_dict()['log_history'], dtype=object)):
        lazy, eager = _twins(_values(dtype))
        got, want = accessor(lazy), accessor(eager)
        assert _same(got, want), (accessor, got, want)


def test_updates_read_nothing_and_a_read_is_one_transfer_per_dtype_and_device():
    values = (_values(torch.float32, 5) + [2.5, 3] + _values(torch.bfloat16, 4)
              + _values(torch.int64, 2))
    eager = _twins(values)[1]
    lazy = HistoryBuffer()
    with DeviceReads('dispatch') as reads:
        for value in values:
            lazy.update(value)
    assert reads.total == 0
    with DeviceReads('dispatch') as reads:
        lazy.current()
        lazy.mean()
    assert reads.ops == {'Tensor.tolist': 3}  # float32, bfloat16, int64: one stack each, once
    assert lazy.state_dict() == eager.state_dict()
    assert all(map(_same, lazy.state_dict()['log_history'], eager.state_dict()['log_history']))


def test_the_buffer_keeps_numpys_value_types():
    # MMEngine's numpy array: ints stay ints until a float comes; an empty start is a float array.
    for first, later in ([torch.tensor(3)], [torch.tensor(4), 2.5]), ([torch.tensor(True)], [5]):
        lazy = HistoryBuffer(first, [1])
        eager = HistoryBuffer([t.item() for t in first], [1])
        for value in later:
            lazy.update(value)
            eager.update(value)
        assert all(map(_same, lazy.state_dict()['log_history'], eager.state_dict()['log_history']))
        assert _same(lazy.current(), eager.current()) and _same(lazy.max(), eager.max())
    lazy, eager = _twins([torch.tensor(7)])
    assert _same(lazy.current(), eager.current()) and type(lazy.current()) is np.float64


def test_a_value_cannot_change_after_it_was_logged():
    loss = torch.tensor(1.5)
    buffer = HistoryBuffer()
    buffer.update(loss)
    loss.add_(1)
    assert buffer.current() == 1.5


def test_bad_tensors_fail_where_they_are_logged():
    buffer = HistoryBuffer()
    with pytest.raises(ValueError, match=r'exactly one element, got shape \(2,\)'):
        buffer.update(torch.ones(2))
    with pytest.raises(TypeError, match='complex64'):
        buffer.update(torch.tensor(1j))
    with pytest.raises(ValueError, match='exactly one element'):
        MessageHub('bad-tensor').update_scalar('train/loss', torch.ones(3))


def test_max_length_and_the_bound_on_pending_tensors():
    lazy, eager = _twins(_values(torch.float32, 12), list(range(1, 13)), max_length=5)
    assert lazy.state_dict() == eager.state_dict() and len(lazy.state_dict()['log_history']) == 5
    buffer = HistoryBuffer()
    with DeviceReads('dispatch') as reads:
        for _ in range(READ_AFTER + 1):
            buffer.update(torch.tensor(0.5))
    assert reads.total == 1 and len(buffer._pending) == 1  # read itself once, at READ_AFTER


def test_copies_and_pickles_hold_numbers():
    lazy, eager = _twins(_values(torch.float32))
    for copied in (copy.deepcopy(lazy), pickle.loads(pickle.dumps(lazy))):
        assert not copied._pending and copied.state_dict() == eager.state_dict()
        copied.update(torch.tensor(2.0))
        assert copied.current() == 2.0


def test_message_hub_keeps_tensors_until_a_value_is_asked_for():
    hub = MessageHub('keeps-tensors')
    with DeviceReads('dispatch') as reads:
        for step in range(4):
            hub.update_scalar('train/loss', torch.tensor(0.25 * step, requires_grad=True) * 2)
            hub.update_scalars({'train/acc': torch.tensor(step), 'train/n': {'value': 1.0,
                                                                             'count': 2}})
    assert reads.total == 0
    assert not hub.get_scalar('train/loss')._pending._values[0].requires_grad  # no graph is kept
    with DeviceReads('dispatch') as reads:
        assert hub.get_scalar('train/loss').current() == 1.5
        state = hub.state_dict()
    assert reads.total == 2  # the loss at current(), the accuracy at state_dict()
    assert state['log_scalars']['train/acc']['log_history'] == [0, 1, 2, 3]
