"""``minimm bench ema``: the EMA update on realistic tensor lists, against the memory-bandwidth
limit.

Workloads: see :mod:`minimm.bench.common` (ResNet-50, ViT-B, 2,000 small tensors, and ResNet-50
in bf16 with an fp32 EMA). Methods, timed in alternation in the same process (the median over
``--rounds`` rounds):

* ``loop``: MMEngine's averaged-model step, a Python loop calling ``lerp_`` per tensor (for a
  bf16 model, on the source converted to fp32, since ``lerp_`` needs one dtype);
* ``fallback``: :class:`minimm.ops.EMAPlan` with ``backend='ref'``, what minimm's averaged models
  run without the extension (``torch._foreach_lerp_``);
* ``native``: the same plan on the native kernels (left out when they are not available);
* ``one tensor``: the plan (native when available) over one tensor holding all the values, so
  ``native`` / ``one tensor`` is the cost of having many tensors (the per-tensor ratio);
* ``limit``: ``a.add_(b, alpha=c)`` over one flat EMA tensor and one flat source tensor of the
  same sizes and dtypes: it reads and writes the same bytes as an EMA update (read EMA, read
  source, write EMA) with the fewest instructions. For the bf16 list this is a mixed-dtype
  ``add_``, which is memory-bound on a GPU but not on a CPU: there, compare the times only.

Then, when ``resnet50`` is among the workloads, the multi-EMA rows (``--copies``, default K = 2
and 4, on ResNet-50's fp32 tensors): K averaged copies of one model updated by one
:meth:`minimm.ops.EMAPlan.joint` plan (one pass: each source chunk read once, for every copy)
against K single plans (K passes), timed in alternation; the bytes alone allow (4 + 8K) / 12K of
the time: 0.83x for K = 2, 0.75x for K = 4.

Then, when ``resnet50`` is among the workloads, the sharded rows (``--shards``, default N = 1, 2
and 4 processes, on ResNet-50's list):
the step of a model sharded with FSDP2 on each rank's own shard, against the bandwidth limit of
the bytes that rank holds, and the EMA memory per rank (:mod:`minimm.bench.ema_shards`).

Columns: ms per update, GB/s of those bytes, the time as a multiple of the limit, and the
speed-up over ``loop``; under each table, the fallback's speed-up over the loop and the
per-tensor ratio. On a GPU each call is timed between two synchronisations, which costs more than
a small update; so a last line gives the native step's time per step when 200 steps are queued
back to back, and when each is a replay of a CUDA graph holding one step. Absolute numbers
depend on the machine; read the ratios.
"""
import argparse
import json
import time
from typing import Callable, List, Optional

import torch

from minimm.ops import EMAPlan, EMATarget, backend_info

from .common import WORKLOADS, add_output_options, median_times, numel, print_table, start
from .ema_shards import print_shards, shard_row


def bench_workload(name: str, device: torch.device, rounds: int,
                   momentum: float = 0.0002) -> List[dict]:
    shapes, dtype = WORKLOADS[name]
    ema = [torch.randn(s, device=device) for s in shapes()]
    src = [torch.randn(s, device=device).to(dtype) for s in shapes()]
    total = numel(shapes())
    flat_ema = torch.randn(total, device=device)
    flat_src = torch.randn(total, device=device).to(dtype)
    one_ema = flat_ema.clone()
    native = backend_info()[device.type]['backend'] == 'native'
    plans = {'fallback': EMAPlan(ema, src, rule='ema', momentum=momentum, backend='ref'),
             'one tensor': EMAPlan([one_ema], [flat_src], rule='ema', momentum=momentum)}
    if native:
        plans['native'] = EMAPlan(ema, src, rule='ema', momentum=momentum, backend='native')
    # past the copy
    steps = {method: torch.ones((), dtype=torch.long, device=device) for method in plans}

    def loop():
        for e, s in zip(ema, src):
            e.lerp_(s.float(), momentum)

    # Each plan row follows a row that leaves the thread pool idle (the loop, the fallback): on a
    # busy machine waking it can cost more than a small update, and both rows of the per-tensor
    # ratio should pay it alike.
    methods = {'loop': loop}
    for method in ('native', 'fallback', 'one tensor'):
        if method in plans:
            methods[method] = lambda m=method: plans[m].step(steps[m])
    methods['limit'] = lambda: flat_ema.add_(flat_src, alpha=momentum)
    times = median_times(methods, rounds, device)
    # read + write the EMA, read the source
    moved = total * (2 * flat_ema.element_size() + flat_src.element_size())
    return [dict(workload=name, tensors=len(ema), values=total, method=m, ms=t * 1e3,
                 gb_per_s=moved / t / 1e9, x_limit=t / times['limit']) for m, t in times.items()]


def bench_copies(k: int, device: torch.device, rounds: int, name: str = 'resnet50') -> List[dict]:
    """K copies of the workload's EMA: one joint plan's step against K single plans' steps."""
    shapes, _ = WORKLOADS[name]
    src = [torch.randn(s, device=device) for s in shapes()]
    copies = [[torch.randn(s, device=device) for s in shapes()] for _ in range(k)]
    joint = EMAPlan.joint([EMATarget(ema, (), 'ema', 0.0002) for ema in copies], src)
    singles = [EMAPlan(ema, src, rule='ema', momentum=0.0002) for ema in copies]
    counters = [torch.ones((), dtype=torch.long, device=device) for _ in range(k)]
    times = median_times({'K passes': lambda: [p.step(c) for p, c in zip(singles, counters)],
                          'one pass': lambda: joint.step(counters)}, rounds, device)
    moved = {'K passes': 12 * k, 'one pass': 4 + 8 * k}  # bytes per value, fp32
    total = numel(shapes())
    return [dict(workload=f'{name} x{k}', tensors=len(src), values=total, method=m, ms=t * 1e3,
                 gb_per_s=moved[m] * total / t / 1e9, x_passes=t / times['K passes'],
                 backend=joint.backend) for m, t in times.items()]


def print_copies(rows: List[dict]) -> None:
    """The multi-EMA table: one pass against K passes, with what the bytes alone allow."""
    print(f"multi-EMA: K copies of {rows[0]['workload'].split()[0]} in one pass vs K passes "
          f"({rows[0]['backend']} plans)")
    print(f"  {'K':<4}{'K passes ms':>13}{'one pass ms':>13}{'ratio':>8}{'bytes only':>12}")
    for passes, one in zip(rows[::2], rows[1::2]):
        k = int(passes['workload'].split('x')[-1])
        print(f"  {k:<4}{passes['ms']:>13.2f}{one['ms']:>13.2f}{one['x_passes']:>7.2f}x"
              f"{(4 + 8 * k) / (12 * k):>11.2f}x")


def back_to_back_us(fn: Callable[[], None], device: torch.device, calls: int = 200) -> float:
    """Microseconds per call of ``fn`` queued ``calls`` times between two synchronisations."""
    fn()
    torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize(device)
    return (time.perf_counter() - start) / calls * 1e6


def gpu_steps(name: str, device: torch.device, momentum: float = 0.0002) -> str:
    """The native plan's step, back to back and replayed from a CUDA graph, in microseconds."""
    shapes, dtype = WORKLOADS[name]
    ema = [torch.randn(s, device=device) for s in shapes()]
    src = [torch.randn(s, device=device).to(dtype) for s in shapes()]
    plan = EMAPlan(ema, src, rule='ema', momentum=momentum, backend='native')
    steps = torch.ones((), dtype=torch.long, device=device)
    eager = back_to_back_us(lambda: plan.step(steps), device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan.step(steps)
    replayed = back_to_back_us(graph.replay, device)
    return (f'  native step, 200 back to back: {eager:.1f} us each; replayed from a CUDA graph: '
            f'{replayed:.1f} us each')


def ratios(rows: List[dict]) -> str:
    """The must-show line under a table: fallback vs loop, and the per-tensor ratio."""
    ms = {r['method']: r['ms'] for r in rows}
    many = 'native' if 'native' in ms else 'fallback'
    return (f"  fallback {ms['loop'] / ms['fallback']:.2f}x faster than the loop; per-tensor "
            f"ratio ({many}, {rows[0]['tensors']} tensors / one tensor): "
            f"{ms[many] / ms['one tensor']:.2f}x")


def main(argv: Optional[List[str]] = None) -> List[dict]:
    parser = argparse.ArgumentParser(prog='minimm bench ema', description=__doc__.split('\n\n')[0])
    parser.add_argument('--workloads', nargs='+', default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--rounds', type=int, default=None,
                        help='timed rounds per workload '
                             '(default: 20 for the large lists, 200 for small)')
    parser.add_argument('--copies', type=lambda text: [int(k) for k in text.split(',') if k],
                        default=[2, 4], help='multi-EMA rows (with the resnet50 workload): numbers '
                                             "of copies K (default 2,4; '' for none)")
    parser.add_argument('--shards', type=lambda text: [int(n) for n in text.split(',') if n],
                        default=[1, 2, 4], help='sharded rows (with the resnet50 workload): '
                                                'numbers of gloo processes N '
                                                "(default 1,2,4; '' for none)")
    add_output_options(parser)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    start(args, device)
    rows = []
    for name in args.workloads:
        rounds = args.rounds or (200 if name == 'small' else 20)
        result = bench_workload(name, device, rounds)
        rows += result
        if not args.json:
            r = result[0]
            print_table(f"{name}: {r['tensors']} tensors, {r['values'] / 1e6:.1f} M values, "
                        f"median of {rounds}", result, baseline='loop')
            print(ratios(result))
            if device.type == 'cuda' and any(row['method'] == 'native' for row in result):
                print(gpu_steps(name, device))
    copies = []
    for k in args.copies if 'resnet50' in args.workloads else ():
        copies += bench_copies(k, device, args.rounds or 20)
    if copies and not args.json:
        print_copies(copies)
    rows += copies
    shards = [shard_row('resnet50', n, args.rounds or 20)
              for n in (args.shards if 'resnet50' in args.workloads else ())]
    if shards and not args.json:
        print_shards(shards)
    rows += shards
    if args.json:
        print(json.dumps(rows, indent=1))
    return rows


if __name__ == '__main__':
    main()
