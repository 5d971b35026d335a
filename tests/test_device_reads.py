"""DeviceReads, the counting oracle of the sync-free tests and of the sync audit, tested on its
own: each way of reading a value counts once, tensor work that reads nothing counts zero, and each
read is filed under who asked."""
import numpy as np
import pytest
import torch

from minimm.runner.device_reads import DeviceReads


def _reads(fn) -> DeviceReads:
    with DeviceReads('dispatch') as reads:
        fn()
    return reads


@pytest.mark.parametrize('read', [
    lambda t: t.sum().item(),
    lambda t: float(t.sum()),
    lambda t: int(t.sum()),
    lambda t: bool(t.sum() > 0),
    lambda t: 1 if t.sum() > 0 else 0,           # an `if` on a tensor
    lambda t: t.tolist(),
    lambda t: t.numpy(),
    lambda t: np.asarray(t),
    lambda t: t.nonzero(),
    lambda t: t[t > 0],                           # boolean indexing becomes a nonzero
    lambda t: torch.equal(t, t),
    lambda t: t.unique(),
    lambda t: f'{t.sum():.3f}',                   # formatting a 0-dim tensor reads it
], ids=['item', 'float', 'int', 'bool', 'if', 'tolist', 'numpy', 'np.asarray', 'nonzero',
        'mask', 'equal', 'unique', 'format'])
def test_each_kind_of_read_counts_once(read):
    t = torch.arange(6.0) - 2
    assert _reads(lambda: read(t)).total == 1


def test_tensor_work_that_reads_nothing_counts_zero():
    def work():
        t = torch.randn(4, 4)
        u = (t @ t).relu_().sum()
        torch.stack([u, u * 2])
        t[torch.tensor([0, 2])] += 1               # integer indexing needs no nonzero
        t.numel(), t.shape, t.dtype                # metadata lives on the host
    assert _reads(work).total == 0


def test_host_methods_are_restored_on_exit():
    before = torch.Tensor.tolist
    with DeviceReads('dispatch'):
        assert torch.Tensor.tolist is not before
    assert torch.Tensor.tolist is before and 'tolist' not in torch.Tensor.__dict__
    assert torch.tensor([1.0]).tolist() == [1.0]


def test_nested_counters_both_count():
    with DeviceReads('dispatch') as outer:
        with DeviceReads('dispatch') as inner:
            torch.ones(2).sum().item()
            torch.ones(2).tolist()
        torch.ones(1).item()
    assert (inner.total, outer.total) == (2, 3)


def test_reads_are_filed_under_owner_and_function():
    def model_step():
        return torch.ones(1).item()

    def train_step():  # a model step is recognised by its name on the stack
        return model_step()

    with DeviceReads('dispatch') as reads:
        reads.owner = ('MyHook', 'after_train_iter')
        torch.ones(1).item()
        reads.owner = None
        train_step()
        torch.ones(1).tolist()
    assert reads.by_owner == {('MyHook', 'after_train_iter'): 1, ('model', 'train_step'): 1,
                              ('loop', 'test_device_reads.py:'
                                       'test_reads_are_filed_under_owner_and_function'): 1}
    assert ((('model', 'train_step'), 'test_device_reads.py:test_reads_are_filed_under_owner_'
                                      'and_function.<locals>.model_step') in reads.where)
    assert reads.ops == {'aten._local_scalar_dense.default': 2, 'Tensor.tolist': 1}


def test_bad_mode_is_rejected():
    with pytest.raises(ValueError, match="'dispatch', 'cuda' or None, got 'gpu'"):
        DeviceReads('gpu')


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')
def test_cuda_mode_counts_synchronising_calls():
    t = torch.ones(4, device='cuda')
    with DeviceReads('cuda') as reads:
        (t * 2).sum().item()
        t.add_(1)
    assert reads.total == 1


def test_cuda_mode_counts_torchs_sync_warnings_and_passes_others_on(monkeypatch):
    # Without a GPU: torch's sync debug switch is replaced, and its warning raised by hand, as
    # torch raises it at each synchronising CUDA call in 'warn' mode.
    import warnings
    modes = []
    monkeypatch.setattr(torch.cuda, 'get_sync_debug_mode', lambda: 0)
    monkeypatch.setattr(torch.cuda, 'set_sync_debug_mode', modes.append)

    def train_step():
        warnings.warn('called a synchronizing CUDA operation (Triggered internally at x.cpp)')

    with pytest.warns(UserWarning, match='something else'):
        with DeviceReads('cuda') as reads:
            train_step()
            train_step()
            warnings.warn('something else')
    assert modes == ['warn', 0] and reads.total == 2 and reads.ops == {'cuda sync': 2}
    assert set(reads.where) == {(('model', 'train_step'), 'test_device_reads.py:test_cuda_mode_'
                                 'counts_torchs_sync_warnings_and_passes_others_on.<locals>.'
                                 'train_step')}
