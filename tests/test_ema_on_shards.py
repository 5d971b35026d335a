"""EMAs on DTensors sharded over 2 gloo processes (one spawn for the module's tests).

``ema_update_`` on DTensors (FSDP2's parameters): each rank updates its own shards, with the
numbers of the same call on the whole tensors.

Averaged models of a model whose parameters are DTensors: each rank's averaged copy holds its
own shards only (same placements), the plan updates them with no gather and no host read, and the
gathered averages equal those of the same training on whole tensors, bit for bit (every element
goes through the same operations, on whichever rank holds it)."""
import pytest
import torch
from torch import nn

from dist_utils import run_distributed
from minimm.model import (AveragingGroup, ExponentialMovingAverage, MomentumAnnealingEMA,
                          PowerFunctionEMA, StochasticWeightAverage)
from minimm.runner.device_reads import DeviceReads

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py

STEPS = 5


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 7), nn.BatchNorm1d(7))


def make_averaged(model):
    single = [ExponentialMovingAverage(model, momentum=0.25),
              MomentumAnnealingEMA(model, momentum=0.01, gamma=3, interval=2),
              StochasticWeightAverage(model, update_buffers=True),
              PowerFunctionEMA(model, sigma_rel=0.1, ema_dtype='float64')]
    group = AveragingGroup([PowerFunctionEMA(model, sigma_rel=s) for s in (0.05, 0.1, 0.2)])
    return single, group


def train(model, shard=lambda t: t, extra=False):
    """The same updates on whole tensors or (``shard``) on DTensors; returns the averaged models
    (with ``extra``, each one updated once more, on its own: the sharded run does that while
    counting host reads)."""
    single, group = make_averaged(model)
    for step in range(STEPS):
        torch.manual_seed(100 + step)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(shard(torch.randn(p.shape)))
        for averaged in single:
            averaged.update_parameters(model)
        group.update_parameters(model)
    if extra:
        for averaged in single + group.averaged:
            averaged.update_parameters(model)
    return single + group.averaged


def whole_tensors():
    torch.manual_seed(0)
    ema = [torch.randn(7, 3), torch.randn(5), torch.randn(6, 2, dtype=torch.float64)]
    src = [torch.randn(7, 3), torch.randn(5), torch.randn(6, 2, dtype=torch.float64)]
    return ema, src


def sharded_updates(rank):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    from minimm.ops import ema_update_
    mesh = init_device_mesh('cpu', (2, ))
    ema, src = whole_tensors()
    # 7 rows on 2 ranks: 4 and 3 (uneven shards); a replicated pair; a source replicated while
    # its EMA is sharded (sliced on each rank, no gather).
    ema_layout = [[Shard(0)], [Replicate()], [Shard(1)]]
    src_layout = [[Shard(0)], [Replicate()], [Replicate()]]
    ema_d = [distribute_tensor(t, mesh, p) for t, p in zip(ema, ema_layout)]
    src_d = [distribute_tensor(t, mesh, p) for t, p in zip(src, src_layout)]
    local_before = [t.to_local().data_ptr() for t in ema_d]
    ema_update_(ema_d, src_d, 0.25)
    ema_update_(ema_d, src_d, torch.tensor(0.5))
    assert [t.placements for t in ema_d] == [tuple(p) for p in ema_layout]
    assert [t.to_local().data_ptr() for t in ema_d] == local_before  # in place, on the shards
    return [t.full_tensor() for t in ema_d], [tuple(t.to_local().shape) for t in ema_d]


def on_two_ranks(rank):
    updates = sharded_updates(rank)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard, distribute_tensor
    mesh = init_device_mesh('cpu', (2, ))
    model = make_model()
    for module in model:
        for name, p in list(module.named_parameters(recurse=False)):
            module.register_parameter(name, nn.Parameter(distribute_tensor(p.detach(), mesh,
                                                                           [Shard(0)])))
    averaged = train(model, lambda t: distribute_tensor(t, mesh, [Shard(0)]))
    with DeviceReads('dispatch') as reads:  # the plan steps on the shards: no host read
        for avg in averaged:
            avg.update_parameters(model)
    assert reads.total == 0, reads.total
    weights, local, backends = [], [], []
    for avg in averaged:
        params = list(avg.module.parameters())
        assert all(isinstance(p, DTensor) and p.placements == (Shard(0), ) for p in params)
        weights.append({k: v.full_tensor() if isinstance(v, DTensor) else v
                        for k, v in avg.state_dict().items()})
        local.append(sum(p.to_local().numel() for p in params))
        backends.append(avg.backend)
    return updates, (weights, local, backends)


@pytest.fixture(scope='module')
def ranks(tmp_path_factory):
    """What each of the 2 ranks returned: its ``ema_update_`` results, its averaged models'."""
    return run_distributed(on_two_ranks, tmp_path_factory.mktemp('shards'))


def test_ema_update_on_dtensors_updates_each_rank_s_shards(ranks):
    from minimm.ops import ema_update_
    ema, src = whole_tensors()
    ema_update_(ema, src, 0.25)
    ema_update_(ema, src, torch.tensor(0.5))
    for rank, ((gathered, local_shapes), _) in enumerate(ranks):
        assert local_shapes == [(4, 3) if rank == 0 else (3, 3), (5, ), (6, 1)]
        for got, want in zip(gathered, ema):
            assert torch.equal(got, want)


def test_every_averaging_rule_on_shards_equals_the_whole_tensor_run(ranks):
    whole = train(make_model(), extra=True)
    full_numel = sum(p.numel() for p in whole[0].module.parameters())  # 5*7 + 7 + 7 + 7 = 56
    for rank, (_, (weights, local, backends)) in enumerate(ranks):
        # 7 rows on 2 ranks: 4 and 3 of each parameter, the EMA memory split with them
        assert local == [(4 if rank == 0 else 3) * 8] * len(whole) and 2 * 4 * 8 - full_numel == 8
        assert 'loop' not in backends[:4]  # the fused plan ran on the shards
        for avg, got in zip(whole, weights):
            want = avg.state_dict()
            assert list(got) == list(want)
            for key, value in want.items():
                assert torch.equal(got[key], value), (type(avg).__name__, key)
