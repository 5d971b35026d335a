"""minimm.dist and distributed training, with 2 gloo processes on 127.0.0.1.

One spawn runs every check (starting processes is the slow part); the ranks return what they saw
and the assertions run here, against closed forms.
"""
import os

import pytest
import torch

from dist_utils import run_distributed
from toy import ToyMetric, ToyModel, toy_loader_cfg, toy_runner

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py


def _tensor_checks(rank):
    from minimm import dist
    out = {}
    out['info'] = (dist.get_dist_info(), dist.is_main_process(), dist.is_distributed())
    out['master_only'] = dist.master_only(lambda: 'ran')()

    t = torch.tensor([rank + 1.0, 7.0 * rank])
    dist.broadcast(t)
    out['broadcast'] = t

    for op in ('sum', 'mean'):
        f, i = torch.tensor([1.0 + rank]), torch.tensor([1 if rank == 0 else 4])
        dist.all_reduce(f, op)
        dist.all_reduce(i, op)
        out[f'all_reduce_{op}'] = (f, i)

    def tensors():
        tied = torch.tensor([rank + 1.0, 2.0 * rank])
        return [tied,                                                 # float32
                torch.tensor([[10.0 * rank]], dtype=torch.float64),   # float64
                torch.tensor(1 if rank == 0 else 4),                  # int64, counts differ
                torch.tensor([3, -3]),                                # int64, equal counts
                torch.full((300_000, ), float(rank)),                 # 1.2 MB float32
                torch.tensor([rank] * 3, dtype=torch.int32),
                torch.tensor([[rank, 10.0], [0.0, 0.0]]).t(),         # transposed
                torch.full((1, 3, 2, 2), rank + 1.0).to(memory_format=torch.channels_last),
                tied]                                                 # a second name: reduced once

    for name, kwargs in [('coalesced', {}), ('per_tensor', dict(coalesce=False)),
                         ('bucketed', dict(bucket_size_mb=1))]:
        for op in ('sum', 'mean'):
            ts = tensors()
            dist.all_reduce_params(ts, op=op, **kwargs)
            out[f'params_{name}_{op}'] = ts

    results = [10 * rank + k for k in range(3)]  # rank 0: 0, 1, 2; rank 1: 10, 11, 12
    out['collect'] = dist.collect_results(results, size=5)
    out['collect_gpu_arg'] = dist.collect_results(results, 5, 'gpu')

    # The mmengine.dist functions hooks use (SyncBuffersHook's test checks buffers with
    # all_gather); a transposed tensor goes through a contiguous copy.
    out['all_gather'] = dist.all_gather(torch.tensor([[rank, 1.0], [2.0, 3.0]]).t())
    out['gather'] = dist.gather(torch.tensor([rank + 5]), dst=1)
    out['all_gather_object'] = dist.all_gather_object(dict(rank=rank))
    out['gather_object'] = dist.gather_object(('r', rank), dst=0)
    objects = ['from rank 0', 0] if rank == 0 else [None, None]
    dist.broadcast_object_list(objects)
    out['broadcast_object_list'] = objects
    # Keys in another insertion order on each rank: sorted, so the same tensors meet.
    pairs = [('b', torch.tensor([1.0 + rank])), ('a', torch.tensor([10 * rank]))]
    reduced = dict(pairs if rank == 0 else pairs[::-1])
    dist.all_reduce_dict(reduced, op='mean')
    out['all_reduce_dict'] = reduced
    import numpy as np
    np.random.seed(rank)  # different draws on each rank; rank 0's wins
    out['seed'] = (dist.sync_random_seed(), np.random.RandomState(0).randint(2**31))
    return out


def _ddp_checks(rank):
    """Different data per rank, 3 steps: the wrapper's train_step keeps the ranks identical;
    stepping the module directly (no DDP forward, so no gradient sync) lets them drift."""
    from minimm.model import MMDistributedDataParallel
    from minimm.optim import build_optim_wrapper
    torch.manual_seed(0)
    synced = MMDistributedDataParallel(ToyModel())
    torch.manual_seed(0)
    unsynced = MMDistributedDataParallel(ToyModel())
    g = torch.Generator().manual_seed(100 + rank)
    wrappers = [build_optim_wrapper(m.module, dict(optimizer=dict(type='SGD', lr=0.5)))
                for m in (synced, unsynced)]
    for _ in range(3):
        x = torch.randn(4, 4, generator=g)
        batch = dict(inputs=x, data_samples=(x.sum(1) > 0).long())
        synced.train_step(batch, wrappers[0])
        unsynced.module.train_step(batch, wrappers[1])
    return {name: [p.detach().clone() for p in m.module.parameters()]
            for name, m in (('synced', synced), ('unsynced', unsynced))}


def _runner_checks(rank, tmp):
    """A whole Runner.train() under launcher='pytorch', each rank with its own work_dir."""
    from minimm.model import MMDistributedDataParallel
    work_dir = os.path.join(tmp, f'rank{rank}')
    runner = toy_runner(work_dir, max_=2, val=False, launcher='pytorch',
                        train_dataloader=toy_loader_cfg(12, 2),
                        val_dataloader=toy_loader_cfg(8, 2, shuffle=False), val_cfg=dict(),
                        val_evaluator=ToyMetric(),
                        custom_hooks=[dict(type='EMAHook', momentum=0.2, priority=49)])
    runner.train()
    files = sorted(os.path.relpath(os.path.join(root, f), work_dir)
                   for root, _, names in os.walk(work_dir) for f in names)
    ema_hook = next(h for h in runner.hooks if type(h).__name__ == 'EMAHook')
    return dict(
        wrapped=isinstance(runner.model, MMDistributedDataParallel),
        distributed=(runner.distributed, runner.rank, runner.world_size),
        iters_per_epoch=len(runner.train_dataloader),
        params=[p.detach().clone() for p in runner.model.module.parameters()],
        ema_source_is_module=ema_hook.src_model is runner.model.module,
        ema=[p.detach().clone() for p in ema_hook.ema_model.module.parameters()],
        metric=runner.message_hub.get_scalar('val/toy/acc').current(),
        files=files, seed=runner.seed, timestamp=runner.timestamp)


def _all_checks(rank, tmp):
    return dict(tensors=_tensor_checks(rank), ddp=_ddp_checks(rank),
                runner=_runner_checks(rank, tmp))


@pytest.fixture(scope='module')
def ranks(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('dist')
    return run_distributed(_all_checks, tmp, str(tmp))


def test_rank_helpers(ranks):
    assert ranks[0]['tensors']['info'] == ((0, 2), True, True)
    assert ranks[1]['tensors']['info'] == ((1, 2), False, True)
    assert ranks[0]['tensors']['master_only'] == 'ran'
    assert ranks[1]['tensors']['master_only'] is None


def test_broadcast_and_all_reduce(ranks):
    for r in ranks:
        t = r['tensors']
        assert t['broadcast'].tolist() == [1.0, 0.0]
        assert t['all_reduce_sum'][0].tolist() == [3.0] and t['all_reduce_sum'][1].tolist() == [5]
        # Integer mean: 1 and 4 -> 2.5 -> 3 (rounded half up; MMEngine truncates to 2).
        assert t['all_reduce_mean'][0].tolist() == [1.5] and t['all_reduce_mean'][1].tolist() == [3]


@pytest.mark.parametrize('mode', ['coalesced', 'per_tensor', 'bucketed'])
def test_all_reduce_params(ranks, mode):
    expected = {
        'sum': [[3.0, 2.0], [[10.0]], 5, [6, -6], 1.0, [1, 1, 1], [[1.0, 0.0], [20.0, 0.0]], 3.0],
        'mean': [[1.5, 1.0], [[5.0]], 3, [3, -3], 0.5, [1, 1, 1], [[0.5, 0.0], [10.0, 0.0]], 1.5],
    }  # int32 0 and 1 -> 0.5 -> 1; the tied tensor (entries 0 and 8) is summed once
    for r in ranks:
        for op, values in expected.items():
            got = r['tensors'][f'params_{mode}_{op}']
            assert got[0].tolist() == values[0] and got[0].dtype == torch.float32
            assert got[1].tolist() == values[1] and got[1].dtype == torch.float64
            assert got[2].item() == values[2] and got[2].dtype == torch.int64
            assert got[3].tolist() == values[3]
            assert torch.all(got[4] == values[4])
            assert got[5].tolist() == values[5] and got[5].dtype == torch.int32
            assert got[6].tolist() == values[6] and got[6].stride() == (1, 2)
            assert torch.all(got[7] == values[7]) and got[7].is_contiguous(memory_format=torch.channels_last)
            assert torch.equal(got[8], got[0])


def test_collect_results_interleaves_ranks_on_rank0(ranks):
    assert ranks[0]['tensors']['collect'] == [0, 10, 1, 11, 2]
    assert ranks[1]['tensors']['collect'] is None


def test_gathers_and_object_collectives(ranks):
    t0, t1 = ranks[0]['tensors'], ranks[1]['tensors']
    for t in (t0, t1):
        assert [g.tolist() for g in t['all_gather']] == [[[0.0, 2.0], [1.0, 3.0]],
                                                         [[1.0, 2.0], [1.0, 3.0]]]
        assert t['all_gather_object'] == [dict(rank=0), dict(rank=1)]
        assert t['broadcast_object_list'] == ['from rank 0', 0]
        assert t['all_reduce_dict']['a'].tolist() == [5] and t['all_reduce_dict']['b'].tolist() == [1.5]
        assert t['collect_gpu_arg'] == t['collect']
    assert t0['gather'] == [] and [g.tolist() for g in t1['gather']] == [[5], [6]]
    assert t0['gather_object'] == [('r', 0), ('r', 1)] and t1['gather_object'] is None
    # Rank 0's draw, np.random.seed(0) then randint(2**31), reaches both ranks.
    assert t0['seed'][0] == t1['seed'][0] == t0['seed'][1]


def test_collectives_without_a_process_group():
    from minimm import dist
    t = torch.tensor([1.0])
    assert dist.all_gather(t) == [t] and dist.gather(t) == [t]
    assert dist.all_gather_object('x') == ['x'] and dist.gather_object('x') == ['x']
    objects = ['a']
    dist.broadcast_object_list(objects)
    assert objects == ['a']
    with pytest.raises(TypeError, match='takes a list'):
        dist.broadcast_object_list('a')
    with pytest.raises(ValueError, match='shared tmpdir is not supported'):
        dist.collect_results([1], 1, tmpdir='/tmp/x')


def test_ddp_train_step_synchronises_gradients(ranks):
    for a, b in zip(ranks[0]['ddp']['synced'], ranks[1]['ddp']['synced']):
        assert torch.equal(a, b)
    # The control: without the DDP forward the ranks drift apart on their different data.
    assert any(not torch.equal(a, b)
               for a, b in zip(ranks[0]['ddp']['unsynced'], ranks[1]['ddp']['unsynced']))


def test_runner_trains_ddp_model_with_distributed_sampler(ranks):
    r0, r1 = ranks[0]['runner'], ranks[1]['runner']
    assert r0['wrapped'] and r1['wrapped']
    assert r0['distributed'] == (True, 0, 2) and r1['distributed'] == (True, 1, 2)
    assert r0['iters_per_epoch'] == r1['iters_per_epoch'] == 3  # 12 samples / 2 ranks / batch 2
    for a, b in zip(r0['params'] + r0['ema'], r1['params'] + r1['ema']):
        assert torch.equal(a, b)
    assert r0['ema_source_is_module'] and r1['ema_source_is_module']
    # The evaluator gathered both halves of the val set: every rank got the same metric.
    assert r0['metric'] == r1['metric']
    assert r0['seed'] == r1['seed'] == 0 and r0['timestamp'] == r1['timestamp']


def test_only_rank0_writes_checkpoints_and_logs(ranks):
    r0, r1 = ranks[0]['runner'], ranks[1]['runner']
    stamp = r0['timestamp']
    assert {'epoch_1.pth', 'epoch_2.pth', 'last_checkpoint', f'{stamp}/{stamp}.log',
            f'{stamp}/vis_data/scalars.json'} <= set(r0['files'])
    assert r1['files'] == []
