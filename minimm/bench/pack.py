"""``minimm bench pack``: packing many buffers into flat tensors and back, against the copy limit.

A round trip is what a coalesced all-reduce does around the collective: pack the buffers into
one flat tensor per dtype, then scatter the flat tensors back (here with ``--scale``, the fused
``1 / world_size`` of a 'mean'). Workloads: the EMA benchmark's lists plus ``resnet50_bn``, the
BatchNorm buffers of ResNet-50 (106 fp32 statistics and 53 int64 counters). Methods:

* ``per_buffer``: one ``copy_`` per buffer into a slice of a flat tensor, and back;
* ``flatten_cat``: MMEngine's ``_flatten_dense_tensors`` (``torch.cat``), then
  ``_unflatten_dense_tensors`` and a ``copy_`` per buffer (the PyTorch twins do the same);
* ``plan``: :class:`minimm.ops.PackPlan` ``pack()`` + ``unpack_()`` (one native call each);
* ``limit``: two plain ``copy_`` calls of one flat tensor of the same bytes (pack and unpack each
  move every byte once).

``--dist`` adds a 2-process gloo all-reduce (SUM, then the mean) of ResNet-50's BatchNorm
buffers: one all-reduce per buffer, packed with a PackPlan, and one all-reduce of the
already-packed flat tensors (the floor: the collectives alone).
"""
import argparse
import json
from typing import Callable, Dict, List, Optional

import torch
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from minimm.dist import free_port
from minimm.ops import PackPlan

from .common import (WORKLOADS, add_output_options, local_gloo_group, median_times, print_table,
                     start)


def resnet50_bn_buffers(device: torch.device) -> List[torch.Tensor]:
    """running_mean, running_var and num_batches_tracked of each of ResNet-50's 53 BatchNorms."""
    widths = [64] + [w for width, blocks in zip((64, 128, 256, 512), (3, 4, 6, 3))
                     for block in range(blocks)
                     for w in [width, width, width * 4] + ([width * 4] if block == 0 else [])]
    buffers = []
    for width in widths:
        buffers += [torch.randn(width, device=device), torch.rand(width, device=device) + 0.5,
                    torch.tensor(7, device=device)]
    return buffers


def workload_tensors(name: str, device: torch.device) -> List[torch.Tensor]:
    if name == 'resnet50_bn':
        return resnet50_bn_buffers(device)
    shapes, dtype = WORKLOADS[name]
    return [torch.randn(shape, device=device).to(dtype) for shape in shapes()]


def bench_workload(name: str, device: torch.device, rounds: int, scale: float) -> List[dict]:
    tensors = workload_tensors(name, device)
    plan = PackPlan(tensors)
    moved = 2 * sum(t.numel() * t.element_size() for t in tensors)
    by_dtype: Dict[torch.dtype, List[torch.Tensor]] = {}
    for t in tensors:
        by_dtype.setdefault(t.dtype, []).append(t)
    flats = [torch.empty(sum(t.numel() for t in group), dtype=dtype, device=device)
             for dtype, group in by_dtype.items()]
    source = torch.empty(moved // 2, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)

    def per_buffer():
        for flat, group in zip(flats, by_dtype.values()):
            views, offset = [], 0
            for t in group:
                views.append(flat[offset:offset + t.numel()])
                offset += t.numel()
            for v, t in zip(views, group):
                v.copy_(t.view(-1))
            for v, t in zip(views, group):
                t.view(-1).copy_(v * scale if scale != 1.0 and t.is_floating_point() else v)

    def flatten_cat():
        for group in by_dtype.values():
            flat = _flatten_dense_tensors(group)
            if scale != 1.0 and flat.is_floating_point():
                flat.mul_(scale)
            for t, synced in zip(group, _unflatten_dense_tensors(flat, group)):
                t.copy_(synced)

    def limit():
        target.copy_(source)
        source.copy_(target)

    def round_trip():
        plan.pack()
        plan.unpack_(scale)

    methods: Dict[str, Callable[[], None]] = {'per_buffer': per_buffer, 'flatten_cat': flatten_cat,
                                              'plan': round_trip, 'limit': limit}
    times = median_times(methods, rounds, device)
    values = sum(t.numel() for t in tensors)
    return [dict(workload=name, tensors=len(tensors), values=values, method=m, ms=t * 1e3,
                 gb_per_s=moved / t / 1e9, x_limit=t / times['limit']) for m, t in times.items()]


# ---- --dist: 2 gloo processes ---------------------------------------------------------------

def _dist_worker(rank: int, world_size: int, port: int, rounds: int, results: dict) -> None:
    import torch.distributed as dist
    with local_gloo_group(rank, world_size, port):
        device = torch.device('cpu')
        buffers = resnet50_bn_buffers(device)
        plan = PackPlan(buffers)
        prepacked = plan.pack()

        def per_buffer():
            for b in buffers:
                dist.all_reduce(b)

        def packed():
            for flat in plan.pack():
                dist.all_reduce(flat)
            plan.unpack_(1.0 / world_size)

        def prepacked_only():
            for flat in prepacked:
                dist.all_reduce(flat)

        methods = {'per_buffer': per_buffer, 'packed': packed, 'one_prepacked': prepacked_only}
        dist.barrier()
        times = median_times(methods, rounds, device)
        if rank == 0:
            results.update(times)


def bench_dist(rounds: int) -> List[dict]:
    import torch.multiprocessing as mp
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(_dist_worker, args=(2, free_port(), rounds, results), nprocs=2, join=True)
        times = dict(results)
    floor = times['one_prepacked']
    return [dict(workload='resnet50_bn_allreduce', tensors=159, method=m, ms=t * 1e3,
                 x_floor=t / floor) for m, t in times.items()]


def main(argv: Optional[List[str]] = None) -> List[dict]:
    names = ['resnet50_bn'] + list(WORKLOADS)
    parser = argparse.ArgumentParser(prog='minimm bench pack', description=__doc__.split('\n\n')[0])
    parser.add_argument('--workloads', nargs='+', default=names, choices=names)
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--rounds', type=int, default=None,
                        help='timed rounds per workload '
                             '(default: 20 for the large lists, 200 for the small ones)')
    parser.add_argument('--scale', type=float, default=0.5,
                        help='the scale fused into unpack (default 0.5)')
    parser.add_argument('--dist', action='store_true', help='also time a 2-process gloo all-reduce')
    add_output_options(parser)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    start(args, device, note=f'; unpack scale {args.scale}')
    rows = []
    for name in args.workloads:
        rounds = args.rounds or (200 if name in ('small', 'resnet50_bn') else 20)
        result = bench_workload(name, device, rounds, args.scale)
        rows += result
        if not args.json:
            r = result[0]
            print_table(f"{name}: {r['tensors']} tensors, {r['values'] / 1e6:.2f} M values, "
                        f'pack + unpack, median of {rounds}', result, baseline='per_buffer')
    if args.dist:
        result = bench_dist(args.rounds or 100)
        rows += result
        if not args.json:
            print('resnet50_bn all-reduce, 2 gloo processes on 127.0.0.1 (SUM then mean)')
            for r in result:
                print(f"  {r['method']:<14}{r['ms']:>10.3f} ms{r['x_floor']:>8.2f} x one_prepacked")
    if args.json:
        print(json.dumps(rows, indent=1))
    return rows


if __name__ == '__main__':
    main()
