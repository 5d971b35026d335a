"""Sharded training (torch's FSDP2 in MMEngine's config shapes) with every EMA on the shards, on 2
gloo processes (one spawn runs every check) and 4 (one spawn). One process running the same
configs, and the checks of the keys and options: tests/test_fsdp_options.py.

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
SAMPLES, BATCH = 48, 6  # 2 ranks: 4 iterations an epoch; 4 ranks: 2
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
    """2 epochs of SGD with momentum, over SAMPLES samples shared by the ranks."""
    from minimm.registry import RUNNERS
    torch.manual_seed(0)
    val_kwargs = dict(val_dataloader=toy_loader_cfg(8, 2, shuffle=False), val_cfg=dict(),
                      val_evaluator=ToyMetric()) if val else {}
    kwargs.setdefault('optim_wrapper', dict(optimizer=dict(type='SGD', lr=0.1, momentum=0.9)))
    return RUNNERS.get(runner_type)(
        model=WideToy(), work_dir=work_dir, launcher=launcher,
        train_dataloader=toy_loader_cfg(SAMPLES, BATCH), randomness=dict(seed=0),
        train_cfg=dict(by_epoch=True, max_epochs=2, val_interval=1),
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


def _is_linear(module):
    return isinstance(module, nn.Linear)


class DtypeSeen(Hook):
    """The dtype of the hidden layer's weight as its forward sees it (the gathered weight)."""

    def before_train(self, runner):
        self.seen = set()
        hidden = runner.model.module.hidden
        hidden.register_forward_pre_hook(lambda m, args: self.seen.add(m.weight.dtype))


def _flexible(rank, tmp, name, strategy, hooks=()):
    """FlexibleRunner with ``strategy`` and an EMAHook (EMAHook's first rule, as in
    :func:`_train_with_every_average`)."""
    from minimm.hooks import EMAHook
    runner = _runner(os.path.join(tmp, name, str(rank)), [EMAHook(**RULES[0]), *hooks],
                     runner_type='FlexibleRunner', strategy=strategy)
    runner.train()
    return runner, dict(averages=_averages(runner),
                        params=_gathered(runner.model.module.parameters()),
                        wrapper=type(runner.model).__name__)


def _flexible_runs(rank, tmp):
    from torch.distributed.fsdp import FSDPModule
    out = {}
    # FSDP1's size-based policy (FSDP2 shards `hidden`, 35 parameters, on its own) and
    # activation checkpointing of the Linear layers: neither changes a number.
    policy = dict(type='torch.distributed.fsdp.wrap.size_based_auto_wrap_policy',
                  min_num_params=20)
    runner, out['fsdp'] = _flexible(rank, tmp, 'flex_fsdp', dict(
        type='FSDPStrategy', model_wrapper=dict(auto_wrap_policy=policy),
        activation_checkpointing=dict(check_fn=_is_linear), state_dict_cfg='full'))
    model = runner.model.module
    out['fsdp'].update(own_shard=[isinstance(model.hidden, FSDPModule),
                                  isinstance(model.head, FSDPModule)],
                       state_dict_cfg=runner.strategy.state_dict_cfg)
    _, out['ddp'] = _flexible(rank, tmp, 'flex_ddp', dict(type='DDPStrategy'))
    # bf16 parameters in forward and backward, gradients reduced in fp32
    seen = DtypeSeen()
    runner, out['bf16'] = _flexible(rank, tmp, 'flex_bf16', dict(
        type='FSDPStrategy', model_wrapper=dict(mixed_precision=dict(
            param_dtype='bfloat16', reduce_dtype='float32'))), hooks=[seen])
    out['bf16'].update(seen=seen.seen, dtypes={p.dtype for p in runner.model.parameters()})
    return out


def _bench_rank():
    """``minimm bench ema``'s sharded row, measured on this rank, on a tiny workload."""
    from minimm.bench import common, ema_shards
    common.WORKLOADS['tiny'] = common.Workload(lambda: [(3, 5), (7, ), ()])
    return ema_shards.measure('tiny', rounds=1)


def _two_ranks(rank, tmp):
    out = {'bench': _bench_rank()}
    for wrapper in ('MMDistributedDataParallel', 'MMFullyShardedDataParallel'):
        out[wrapper] = _train_with_every_average(rank, tmp, wrapper)
        out['val', wrapper] = _validate_with_the_ema(rank, tmp, wrapper)
    out['flexible'] = _flexible_runs(rank, tmp)
    for wrapper in ('MMDistributedDataParallel', 'MMFullyShardedDataParallel'):
        # gradient accumulation: the first backward of each pair keeps its gradients local
        runner = _runner(os.path.join(tmp, 'accumulate', wrapper, str(rank)), [],
                         cfg=dict(model_wrapper_cfg=dict(type=wrapper)), optim_wrapper=dict(
                             optimizer=dict(type='SGD', lr=0.1), accumulative_counts=2))
        runner.train()
        out['accumulate', wrapper] = _gathered(runner.model.module.parameters())
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


SHAPES = [(ROWS, 4), (ROWS, 1), (ROWS, 1), (ROWS, 1), (2, ROWS), (2, 1)]  # (rows, row size)


def _share(rank, world_size):
    """The elements of one averaged copy that ``rank`` holds: FSDP2 splits each tensor's rows as
    ``torch.chunk`` does, in chunks of ceil(rows / N) (the last ones shorter or empty)."""
    def rows(n):
        chunk = -(-n // world_size)
        return max(0, min(chunk, n - rank * chunk))
    return sum(rows(n) * size for n, size in SHAPES)


def _assert_shares(ranks):
    world_size = len(ranks)
    full = sum(n * size for n, size in SHAPES)
    padded = sum(-(-n // world_size) * size for n, size in SHAPES)  # 1/N, rounded up per tensor
    shares = [_share(rank, world_size) for rank in range(world_size)]
    assert sum(shares) == full and max(shares) <= padded
    # PowerFunctionEMA's copy is fp64 (ema_dtype), the others fp32
    sizes = [4] * (len(RULES) - 1) + [8] + [4] * len(SIGMA_RELS)
    for rank, out in enumerate(ranks):
        memory = out['MMFullyShardedDataParallel']['memory']
        assert memory == [(shares[rank], shares[rank] * size) for size in sizes]


def test_each_rank_holds_its_share_of_the_averages(two_ranks):
    assert [_share(rank, 2) for rank in range(2)] == [36, 29]  # 65 elements: 32.5 + padding
    _assert_shares(two_ranks)


def test_no_host_read_in_a_sharded_iteration(two_ranks):
    # 4 iterations an epoch; the epoch's last logs its line, reading the loss once, and the
    # run's last writes PostHocEMAHook's snapshots: under DDP on rank 0, reading each EMA's
    # count; sharded, every rank writes its shards (minimm/sharded_checkpoint.py), which reads
    # them back to the host: a save, not a training step.
    for index, rank in enumerate(two_ranks):
        want = [0] * 3 + [1] + [0] * 3 + [1 + (len(SIGMA_RELS) if index == 0 else 0)]
        assert rank['MMDistributedDataParallel']['reads'] == want
        sharded = rank['MMFullyShardedDataParallel']['reads']
        assert sharded[:-1] == want[:-1] and sharded[-1] > len(SIGMA_RELS)


def test_validation_swaps_the_shards_in_place(two_ranks):
    for rank in two_ranks:
        ddp, fsdp = rank['val', 'MMDistributedDataParallel'], rank['val',
                                                                    'MMFullyShardedDataParallel']
        assert fsdp['in_place'] and fsdp['metrics'] == ddp['metrics']
        assert all(torch.equal(a, b) for a, b in zip(ddp['params'], fsdp['params']))


def test_flexible_runner_with_fsdp_and_ddp_strategies(two_ranks):
    for rank in two_ranks:
        ddp = rank['MMDistributedDataParallel']
        flexible = rank['flexible']
        assert flexible['fsdp']['wrapper'] == 'MMFullyShardedDataParallel'
        assert flexible['ddp']['wrapper'] == 'MMDistributedDataParallel'
        assert flexible['fsdp']['own_shard'] == [True, False]  # the policy picked `hidden`
        assert flexible['fsdp']['state_dict_cfg'] == 'full'
        for run in ('fsdp', 'ddp'):
            assert all(torch.equal(a, b) for a, b in zip(flexible[run]['params'], ddp['params']))
            _assert_equal_states(flexible[run]['averages'], ddp['averages'][:1], run)


def test_gradient_accumulation_syncs_once_a_group(two_ranks):
    for rank in two_ranks:
        ddp, fsdp = (rank['accumulate', w] for w in ('MMDistributedDataParallel',
                                                     'MMFullyShardedDataParallel'))
        assert all(torch.equal(a, b) for a, b in zip(ddp, fsdp))


def test_mixed_precision_bf16_parameters_fp32_reduction(two_ranks):
    for rank in two_ranks:
        bf16, fp32 = rank['flexible']['bf16'], rank['MMDistributedDataParallel']
        assert bf16['seen'] == {torch.bfloat16}  # the gathered weights forward used
        assert bf16['dtypes'] == {torch.float32}  # the shards the optimizer steps on
        ema = bf16['averages'][0]
        assert {v.dtype for v in ema.values() if v.is_floating_point()} == {torch.float32}
        # bf16 keeps 8 bits of mantissa (a relative rounding of 2**-9) of every gathered weight
        # and activation: a gradient off by about 1e-2 of itself, over 8 steps that move the
        # weights by about 0.3, leaves them within 1e-2 of the fp32 run's (measured: 1.2e-3)
        diffs = [(a - b).abs().max().item() for a, b in zip(bf16['params'], fp32['params'])]
        assert 0 < max(diffs) < 1e-2, diffs


def _four_ranks(rank, tmp):
    return {wrapper: _train_with_every_average(rank, tmp, wrapper)
            for wrapper in ('MMDistributedDataParallel', 'MMFullyShardedDataParallel')}


@pytest.fixture(scope='module')
def four_ranks(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('fsdp4')
    return run_distributed(_four_ranks, tmp, str(tmp), world_size=4)


def test_four_ranks_shares_and_averages(four_ranks):
    assert [_share(rank, 4) for rank in range(4)] == [22, 22, 14, 7]
    _assert_shares(four_ranks)
    for rank in four_ranks:
        ddp, fsdp = rank['MMDistributedDataParallel'], rank['MMFullyShardedDataParallel']
        assert 'loop' not in fsdp['backends']
        assert len(fsdp['averages']) == len(ddp['averages']) == len(RULES) + len(SIGMA_RELS)
        # 4 gradients may be summed in another order (see the module docstring): a few units
        # in the last place (measured: 6e-8), within 1e-6; the counters and buffers are exact.
        for got, want in zip(fsdp['averages'] + [fsdp['params']], ddp['averages'] + [
                ddp['params']]):
            pairs = [(got[k], want[k]) for k in want] if isinstance(want, dict) else zip(got, want)
            for a, b in pairs:
                assert a.dtype == b.dtype and (a.double() - b.double()).abs().max() <= 1e-6


def test_bench_sharded_row(two_ranks, capsys, monkeypatch):
    from minimm.bench import common, ema_shards
    monkeypatch.setitem(common.WORKLOADS, 'tiny', common.Workload(lambda: [(3, 5), (7, ), ()]))
    row = ema_shards.row('tiny', [rank['bench'] for rank in two_ranks])
    # rows split 2 + 1, 4 + 3 and 1 + 0 (the 0-d tensor is one row): rank 0 holds 15 of 23
    assert (row['shards'], row['values'], row['full_values']) == (2, 15, 23)
    assert row['ema_mb'] == 15 * 4 / 1e6 and row['x_limit'] > 0 and row['backend'] != 'loop'
    ema_shards.print_shards([row])
    assert 'sharded EMA: tiny (0.0 M values) over N gloo processes' in capsys.readouterr().out
