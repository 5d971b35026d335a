"""``minimm bench ema``'s sharded rows: the EMA step of a model sharded over N processes, each
rank on its own shard, against the bandwidth limit of the bytes that rank holds.

For each N of ``--shards`` (default 1, 2 and 4), N processes on this machine's CPU join a gloo
group and shard the workload's parameters with FSDP2's ``fully_shard`` (each parameter a DTensor
holding about 1/N of its rows). Each rank builds an :class:`~minimm.model.ExponentialMovingAverage`
of the sharded model, whose copy holds the rank's rows only, and times, in alternation:

* ``step``: ``update_parameters(model)``, the fused plan on the rank's local tensors (no
  gather, no collective);
* ``limit``: ``a.add_(b, alpha=c)`` over one flat tensor of the rank's EMA values and one of
  its source values: the same bytes read and written, with the fewest instructions.

A row gives N, the values and the EMA bytes the busiest rank holds (1/N of the model plus the
padding of uneven splits), and the slowest rank's median step against its limit. The N
processes share the machine's cores and memory bus, so read ``x limit`` and the memory column;
the times of different N are not comparable on a machine with fewer cores than N.
"""
import json
import os
import tempfile
from typing import List

import torch
from torch import nn

from .common import WORKLOADS, local_gloo_group, median_times


def measure(name: str, rounds: int) -> dict:
    """This rank's numbers, in a process group already started (one rank of a sharded run)."""
    import torch.distributed as torch_dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from minimm.model import ExponentialMovingAverage
    shapes, dtype = WORKLOADS[name]
    torch.manual_seed(0)
    model = nn.Module()
    # a 0-d tensor becomes one value of one row: FSDP2 shards rows
    model.weights = nn.ParameterList(nn.Parameter(torch.randn(s or (1, )).to(dtype))
                                     for s in shapes())
    fully_shard(model, mesh=init_device_mesh('cpu', (torch_dist.get_world_size(), )))
    ema = ExponentialMovingAverage(model, momentum=0.0002, ema_dtype='float32')
    ema.update_parameters(model)  # the first call copies; the timed ones average
    local_ema = [p.to_local() for p in ema.module.parameters()]
    values = sum(t.numel() for t in local_ema)
    flat_ema = torch.randn(values)
    flat_src = torch.randn(values).to(dtype)
    times = median_times({'step': lambda: ema.update_parameters(model),
                          'limit': lambda: flat_ema.add_(flat_src, alpha=0.0002)},
                         rounds, torch.device('cpu'))
    return dict(values=values, ema_bytes=sum(t.numel() * t.element_size() for t in local_ema),
                step_ms=times['step'] * 1e3, limit_ms=times['limit'] * 1e3,
                backend=ema.backend)


def _worker(rank: int, world_size: int, port: int, name: str, rounds: int, out: str) -> None:
    import torch.distributed as torch_dist
    with local_gloo_group(rank, world_size, port):
        result = measure(name, rounds)
        gathered = [None] * world_size
        torch_dist.all_gather_object(gathered, result)
        if rank == 0:
            with open(out, 'w') as f:
                json.dump(gathered, f)


def shard_row(name: str, world_size: int, rounds: int) -> dict:
    """Spawn ``world_size`` processes that shard ``name`` and time its EMA; one row."""
    import torch.multiprocessing as mp

    from minimm.dist import free_port
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, 'ranks.json')
        mp.spawn(_worker, args=(world_size, free_port(), name, rounds, out), nprocs=world_size)
        with open(out) as f:
            ranks = json.load(f)
    return row(name, ranks)


def row(name: str, ranks: List[dict]) -> dict:
    """The row of one sharded run from every rank's numbers: the busiest rank's memory, the
    slowest rank's step."""
    slowest = max(ranks, key=lambda r: r['step_ms'])
    shapes, _ = WORKLOADS[name]
    full = sum(torch.Size(s or (1, )).numel() for s in shapes())
    return dict(workload=f'{name} sharded', method=f'N={len(ranks)}', shards=len(ranks),
                values=max(r['values'] for r in ranks), full_values=full,
                ema_mb=max(r['ema_bytes'] for r in ranks) / 1e6, ms=slowest['step_ms'],
                limit_ms=slowest['limit_ms'], x_limit=slowest['step_ms'] / slowest['limit_ms'],
                backend=slowest['backend'])


def print_shards(rows: List[dict]) -> None:
    print(f"sharded EMA: {rows[0]['workload'].split()[0]} ({rows[0]['full_values'] / 1e6:.1f} M "
          f"values) over N gloo processes on the CPU, each rank's {rows[0]['backend']} plan on "
          'its own shard')
    print(f"  {'N':<4}{'values/rank':>13}{'EMA MB/rank':>13}{'step ms':>10}{'limit ms':>10}"
          f"{'x limit':>9}")
    for r in rows:
        print(f"  {r['shards']:<4}{r['values']:>13}{r['ema_mb']:>13.2f}{r['ms']:>10.3f}"
              f"{r['limit_ms']:>10.3f}{r['x_limit']:>9.2f}")
