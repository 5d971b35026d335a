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

from minimm.ops import EMAPlan, backend_info

from .common import WORKLOADS, add_output_options, median_times, numel, print_table, start


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
    if args.json:
        print(json.dumps(rows, indent=1))
    return rows


if __name__ == '__main__':
    main()
