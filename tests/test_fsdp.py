"""Sharded training (torch's FSDP2 in MMEngine's config shapes) with every EMA on the shards, on 2
gloo processes (one spawn runs every check) and 4 (one spawn).

The oracle is DDP: the same training, the same data on each rank, run with
``MMDistributedDataParallel``. Each rank computes what a DDP rank computes (FSDP2 gathers the
whole weights before each forward); the gradients are summed over the ranks and divided by the
number of ranks in both (2 values: the sum does not depend on their order, and halving is exact),
the optimizer and the averaging rules are elementwise, so on 2 ranks every weight and every
average, gathered, equals DDP's bit for bit. On 4 ranks the sum of 4 gradients may be added in
another order by gloo's all-reduce and its reduce-scatter: a few units in the last place of a
gradient, carried into the weights and averages; the bound below allows 1e-6 for 6 steps of SGD
at lr 0.1 on weights of size about 1.
"""
import os

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dist_utils import run_distributed
from minimm.hooks import Hook
from minimm.model import BaseModel
from minimm.runner.device_reads import DeviceReads
from toy import ToyMetric, toy_loader_cfg

pytestmark = pytest.mark.ops_backend  # the averages run on this lane's op backend

RULES = [dict(ema_type='ExponentialMovingAverage', momentum=0.2),
         dict(ema_type='MomentumAnnealingEMA', momentum=0.01, gamma=3, interval=2),
         dict(ema_type='StochasticWeightAverage', update_buffers=True),
         dict(ema_type='PowerFunctionEMA', sigma_rel=0.1, ema_dtype='float64')]
SIGMA_RELS = (0.05, 0.1, 0.2)  # PostHocEMAHook's K = 3 EMAs, updated in one fused pass
ROWS = 7  # the hidden layer: 7 rows on 2 ranks are 4 + 3, on 4 ranks 2 + 2 + 2 + 1


class WideToy(BaseModel):
    """4 features -> 7 -> 2 classes, with a BatchNorm: shards of uneven sizes."""

    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(4, ROWS)
        self.bn = nn.BatchNorm1d(ROWS)
        self.head = nn.Linear(ROWS, 2)

    def forward(self, inputs, data_samples=None, mode='tensor'):
        logits = self.head(torch.relu(self.bn(self.hidden(inputs))))
        if mode == 'loss':
            return dict(loss=F.cross_entropy(logits.float(), data_samples))
        if mode == 'predict':
            return [dict(pred_label=p, gt_label=t) for p, t in zip(logits.argmax(1), data_samples)]
        return logits


class ReadsPerIteration(Hook):
    """Host reads between the first and the last hook of each training iteration."""
    priority = 'LOWEST'

    def __init__(self, reads):
        self.reads, self.per_iter, self._start = reads, [], 0

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        self._start = self.reads.total

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.per_iter.append(self.reads.total - self._start)


def _runner(work_dir, hooks, val=False, launcher='pytorch', runner_type='Runner', **kwargs):
    """6 iterations (2 epochs of 3, 12 samples a rank in batches of 2) of SGD with momentum."""
    from minimm.registry import RUNNERS
    torch.manual_seed(0)
    val_kwargs = dict(val_dataloader=toy_loader_cfg(8, 2, shuffle=False), val_cfg=dict(),
                      val_evaluator=ToyMetric()) if val else {}
    return RUNNERS.get(runner_type)(
        model=WideToy(), work_dir=work_dir, launcher=launcher,
        train_dataloader=toy_loader_cfg(12 * 2, 2), randomness=dict(seed=0),
        train_cfg=dict(by_epoch=True, max_epochs=2, val_interval=1),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1, momentum=0.9)),
        default_hooks=dict(checkpoint=None, logger=dict(type='LoggerHook', interval=100)),
        custom_hooks=list(hooks), **val_kwargs, **kwargs)


def _gathered(tensors):
    from torch.distributed.tensor import DTensor
    return [t.full_tensor() if isinstance(t, DTensor) else t.clone() for t in tensors]


def _averages(runner):
    """Every averaged model's state, gathered: EMAHooks' in order, then PostHocEMAHook's."""
    out = []
    for hook in runner.hooks:
        models = [hook.ema_model] if hasattr(hook, 'ema_model') else getattr(hook, 'ema_models',
                                                                             [])
        out += [dict(zip(m.state_dict(), _gathered(m.state_dict().values()))) for m in models]
    return out


def _local_memory(runner):
    """(elements, bytes) of the averaged copies' parameters this rank holds, per averaged model."""
    out = []
    for hook in runner.hooks:
        for m in ([hook.ema_model] if hasattr(hook, 'ema_model') else
                  getattr(hook, 'ema_models', [])):
            local = [p.to_local() for p in m.module.parameters()]
            out.append((sum(t.numel() for t in local),
                        sum(t.numel() * t.element_size() for t in local)))
    return out


def _train_with_every_average(rank, tmp, wrapper):
    """One training with an EMAHook per rule and a PostHocEMAHook, under ``wrapper``."""
    from minimm.hooks import EMAHook, PostHocEMAHook
    reads = DeviceReads('dispatch')
    counter = ReadsPerIteration(reads)
    hooks = [EMAHook(**rule) for rule in RULES] + [
        PostHocEMAHook(sigma_rels=SIGMA_RELS, snapshot_interval=1000), counter]
    runner = _runner(os.path.join(tmp, wrapper, str(rank)), hooks,
                     cfg=dict(model_wrapper_cfg=dict(type=wrapper)))
    with reads:
        runner.train()
    backends = [h.ema_model.backend for h in runner.hooks if hasattr(h, 'ema_model')]
    sharded = wrapper == 'MMFullyShardedDataParallel'
    return dict(averages=_averages(runner), params=_gathered(runner.model.module.parameters()),
                reads=counter.per_iter, backends=backends,
                memory=_local_memory(runner) if sharded else None)


def _validate_with_the_ema(rank, tmp, wrapper):
    """EMAHook's swap before and after validation: the sharded model's parameters keep their
    local tensors (swapped in place); the metric is DDP's."""
    from minimm.hooks import EMAHook
    runner = _runner(os.path.join(tmp, 'val', wrapper, str(rank)),
                     [EMAHook(momentum=0.2)], val=True, cfg=dict(model_wrapper_cfg=dict(
                         type=wrapper)))
    runner.train()
    local = [p.to_local() if hasattr(p, 'to_local') else p for p in runner.model.parameters()]
    before = [t.data_ptr() for t in local]
    metrics = runner.val()
    after = [t.data_ptr() for t in (p.to_local() if hasattr(p, 'to_local') else p
                                    for p in runner.model.parameters())]
    return dict(metrics=metrics, in_place=before == after,
                params=_gathered(runner.model.module.parameters()))


def _two_ranks(rank, tmp):
    out = {}
    for wrapper in ('MMDistributedDataParallel', 'MMFullyShardedDataParallel'):
        out[wrapper] = _train_with_every_average(rank, tmp, wrapper)
        out['val', wrapper] = _validate_with_the_ema(rank, tmp, wrapper)
    return out


@pytest.fixture(scope='module')
def two_ranks(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('fsdp2')
    return run_distributed(_two_ranks, tmp, str(tmp))


def _assert_equal_states(got, want, what):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert list(g) == list(w), what
        for key in w:
            assert torch.equal(g[key], w[key]), (what, i, key)


def test_sharded_averages_equal_ddp_averages_bit_for_bit(two_ranks):
    for rank in two_ranks:
        ddp, fsdp = rank['MMDistributedDataParallel'], rank['MMFullyShardedDataParallel']
        assert all(torch.equal(a, b) for a, b in zip(ddp['params'], fsdp['params']))
        # 4 EMAHooks (one per rule), then PostHocEMAHook's 3 EMAs (one fused plan)
        assert len(fsdp['averages']) == len(RULES) + len(SIGMA_RELS)
        _assert_equal_states(fsdp['averages'], ddp['averages'], 'averages')
        assert 'loop' not in fsdp['backends']  # the fused plan ran on the shards


def test_each_rank_holds_its_share_of_the_averages(two_ranks):
    # Parameters: hidden 7x4 + 7, bn 7 + 7, head 2x7 + 2: FSDP2 shards dim 0 in chunks of
    # ceil(rows / 2): rank 0 holds 4 + 4 + 4 + 4 rows of the 7-row tensors and 1 of the head's 2.
    full = 7 * 4 + 7 + 7 + 7 + 2 * 7 + 2
    want = {0: 4 * 4 + 4 + 4 + 4 + 7 + 1, 1: 3 * 4 + 3 + 3 + 3 + 7 + 1}
    for rank, out in enumerate(two_ranks):
        memory = out['MMFullyShardedDataParallel']['memory']
        dtypes = [4] * (len(RULES) - 1) + [8] + [4] * len(SIGMA_RELS)  # PowerFunctionEMA: fp64
        assert memory == [(want[rank], want[rank] * size) for size in dtypes]
    assert want[0] + want[1] == full and want[0] <= full / 2 + 7  # 1/N plus padding


def test_no_host_read_in_a_sharded_iteration(two_ranks):
    # 6 iterations an epoch; the epoch's last logs its line, reading the loss once, and the
    # run's last writes PostHocEMAHook's snapshots: under DDP on rank 0, reading each EMA's
    # count; sharded, every rank writes its shards (minimm/sharded_checkpoint.py), which reads
    # them back to the host: a save, not a training step.
    for index, rank in enumerate(two_ranks):
        want = [0] * 5 + [1] + [0] * 5 + [1 + (len(SIGMA_RELS) if index == 0 else 0)]
        assert rank['MMDistributedDataParallel']['reads'] == want
        sharded = rank['MMFullyShardedDataParallel']['reads']
        assert sharded[:-1] == want[:-1] and sharded[-1] > len(SIGMA_RELS)


def test_validation_swaps_the_shards_in_place(two_ranks):
    for rank in two_ranks:
        ddp, fsdp = rank['val', 'MMDistributedDataParallel'], rank['val',
                                                                    'MMFullyShardedDataParallel']
        assert fsdp['in_place'] and fsdp['metrics'] == ddp['metrics']
        assert all(torch.equal(a, b) for a, b in zip(ddp['params'], fsdp['params']))
