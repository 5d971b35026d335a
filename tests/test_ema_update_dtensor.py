"""``ema_update_`` on DTensors (FSDP2's parameters): each rank updates its own shards, with the
numbers of the same call on the whole tensors. 2 gloo processes on the CPU."""
import pytest
import torch

from dist_utils import run_distributed

pytestmark = pytest.mark.ops_backend  # see tests/backend_words.py


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


def test_ema_update_on_dtensors_updates_each_rank_s_shards(tmp_path):
    from minimm.ops import ema_update_
    ema, src = whole_tensors()
    ema_update_(ema, src, 0.25)
    ema_update_(ema, src, torch.tensor(0.5))
    results = run_distributed(sharded_updates, tmp_path)
    for rank, (gathered, local_shapes) in enumerate(results):
        assert local_shapes == [(4, 3) if rank == 0 else (3, 3), (5, ), (6, 1)]
        for got, want in zip(gathered, ema):
            assert torch.equal(got, want)
