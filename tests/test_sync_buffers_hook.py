"""SyncBuffersHook: BatchNorm statistics averaged across 2 gloo ranks; when it syncs, and when not."""
from types import SimpleNamespace

import pytest
import torch

from dist_utils import run_distributed
from minimm.hooks import Hook, SyncBuffersHook
from toy import ToyMetric, ToyModel, toy_loader_cfg, toy_runner

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py


class BufferRecorder(Hook):
    """Records the BN buffers the model holds when validation starts."""

    priority = 'LOWEST'

    def __init__(self):
        self.seen = []

    def before_val_epoch(self, runner):
        bn = runner.model.module.bn
        self.seen.append((bn.running_mean.clone(), bn.running_var.clone()))


def _bn_state(model):
    bn = model.module.bn
    return [bn.running_mean.clone(), bn.running_var.clone(), bn.num_batches_tracked.clone()]


def _direct(rank):
    """Rank 0 runs 1 training forward and rank 1 runs 4, on different data; then one sync."""
    from minimm.model import MMDistributedDataParallel
    torch.manual_seed(0)
    model = MMDistributedDataParallel(ToyModel())
    g = torch.Generator().manual_seed(rank)
    for _ in range(1 if rank == 0 else 4):
        model(torch.randn(8, 4, generator=g) + 3 * rank)
    before = _bn_state(model)
    hook = SyncBuffersHook()
    hook.after_train_epoch(SimpleNamespace(model=model))
    return dict(before=before, after=_bn_state(model), distributed=hook.distributed)


def _iter_based_runner(rank, tmp, with_hook):
    """Iteration-based training validates in the middle of the single epoch."""
    recorder = BufferRecorder()
    hooks = [recorder] + ([SyncBuffersHook()] if with_hook else [])
    runner = toy_runner(f'{tmp}/{with_hook}_{rank}', by_epoch=False, max_=3, val=False,
                        launcher='pytorch', custom_hooks=hooks,
                        train_dataloader=toy_loader_cfg(12, 2),
                        val_dataloader=toy_loader_cfg(8, 2, shuffle=False), val_cfg=dict(),
                        val_evaluator=ToyMetric(), default_hooks=dict(checkpoint=None))
    runner.train()
    return recorder.seen


def _checks(rank, tmp):
    return dict(direct=_direct(rank), synced=_iter_based_runner(rank, tmp, True),
                unsynced=_iter_based_runner(rank, tmp, False))


@pytest.fixture(scope='module')
def ranks(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('sync')
    return run_distributed(_checks, tmp, str(tmp))


def test_buffers_become_the_mean_of_the_ranks(ranks):
    r0, r1 = ranks[0]['direct'], ranks[1]['direct']
    assert r0['distributed'] and r1['distributed']
    for i in (0, 1):  # running_mean, running_var differ before, are the mean after
        assert not torch.allclose(r0['before'][i], r1['before'][i])
        expected = (r0['before'][i] + r1['before'][i]) / 2
        assert torch.allclose(r0['after'][i], expected, rtol=0, atol=1e-7)
        assert torch.equal(r0['after'][i], r1['after'][i])


def test_num_batches_tracked_is_not_truncated(ranks):
    r0, r1 = ranks[0]['direct'], ranks[1]['direct']
    assert r0['before'][2].item() == 1 and r1['before'][2].item() == 4
    # (1 + 4) / 2 = 2.5: rounded half up to 3 in integer arithmetic; MMEngine truncates to 2.
    assert r0['after'][2].item() == r1['after'][2].item() == 3
    assert r0['after'][2].dtype == torch.int64


def test_iter_based_validation_sees_synced_buffers(ranks):
    (mean0, var0), = ranks[0]['synced']
    (mean1, var1), = ranks[1]['synced']
    assert torch.equal(mean0, mean1) and torch.equal(var0, var1)
    # The control: without the hook each rank validates with its own statistics.
    (mean0, _), = ranks[0]['unsynced']
    (mean1, _), = ranks[1]['unsynced']
    assert not torch.equal(mean0, mean1)


def test_before_val_epoch_skips_right_after_train_epoch(monkeypatch):
    calls = []
    monkeypatch.setattr('minimm.hooks.sync_buffers_hook.all_reduce_params',
                        lambda params, op: calls.append(op))
    hook = SyncBuffersHook()
    hook.distributed = True
    runner = SimpleNamespace(model=torch.nn.BatchNorm1d(2))
    hook.after_train_epoch(runner)   # syncs
    hook.before_val_epoch(runner)    # just synced: skips
    hook.before_val_epoch(runner)    # iteration-based case: syncs
    assert calls == ['mean', 'mean']


def test_does_nothing_when_not_distributed(monkeypatch):
    calls = []
    monkeypatch.setattr('minimm.hooks.sync_buffers_hook.all_reduce_params',
                        lambda params, op: calls.append(op))
    hook = SyncBuffersHook()
    assert hook.distributed is False
    runner = SimpleNamespace(model=torch.nn.BatchNorm1d(2))
    hook.after_train_epoch(runner)
    hook.before_val_epoch(runner)
    assert calls == []


def test_priority_and_stages():
    hook = SyncBuffersHook()
    assert hook.priority == 'NORMAL'
    assert hook.get_triggered_stages() == ['after_train_epoch', 'before_val_epoch']
