"""``minimm bench ema``: the EMA update on realistic tensor lists, against the memory-bandwidth limit.

Workloads (fp32 parameter lists, shapes written out below, no model code needed):

* ``resnet50``: the 161 parameter tensors of ResNet-50 (25.6 M values);
* ``vit_b``: the 152 parameter tensors of ViT-B/16 (86.6 M values);
* ``small``: 2,000 tensors of 256 values (what a long list of biases and norms looks like).

Methods, timed in alternation in the same process (the median over ``--rounds`` rounds):

* ``loop``: MMEngine's averaged-model step, a Python loop calling ``lerp_`` per tensor;
* ``foreach``: ``torch._foreach_lerp_`` over the lists;
* ``ema_update_``: minimm's list op (converts the Python lists on every call);
* ``plan``: :class:`minimm.ops.EMAPlan`, what minimm's averaged models run (one native call);
* ``limit``: ``a.add_(b, alpha=c)`` over one flat tensor of the same size: reads and writes the
  same bytes as an EMA update (read EMA, read source, write EMA) with the fewest instructions.

Columns: ms per update, GB/s of those 12 bytes per value, the time as a multiple of the limit,
and the speed-up over ``loop``. Absolute numbers depend on the machine; read the ratios.
"""
import argparse
import json
import statistics
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from minimm.ops import EMAPlan, backend_info, ema_update_

Shape = Tuple[int, ...]


def resnet50_shapes() -> List[Shape]:
    """Parameter shapes of torchvision's resnet50 in registration order (161 tensors)."""
    shapes: List[Shape] = [(64, 3, 7, 7), (64,), (64,)]
    in_channels = 64
    for width, blocks in zip((64, 128, 256, 512), (3, 4, 6, 3)):
        for block in range(blocks):
            shapes += [(width, in_channels, 1, 1), (width,), (width,), (width, width, 3, 3), (width,), (width,),
                       (width * 4, width, 1, 1), (width * 4,), (width * 4,)]
            if block == 0:
                shapes += [(width * 4, in_channels, 1, 1), (width * 4,), (width * 4,)]
            in_channels = width * 4
    return shapes + [(1000, 2048), (1000,)]


def vit_b_shapes() -> List[Shape]:
    """Parameter shapes of ViT-B/16 at 224 px (152 tensors)."""
    d = 768
    shapes: List[Shape] = [(1, 1, d), (1, 197, d), (d, 3, 16, 16), (d,)]
    for _ in range(12):
        shapes += [(d,), (d,), (3 * d, d), (3 * d,), (d, d), (d,), (d,), (d,), (4 * d, d), (4 * d,), (d, 4 * d), (d,)]
    return shapes + [(d,), (d,), (1000, d), (1000,)]


WORKLOADS: Dict[str, Callable[[], List[Shape]]] = {
    'resnet50': resnet50_shapes,
    'vit_b': vit_b_shapes,
    'small': lambda: [(256,)] * 2000,
}


def numel(shapes: Sequence[Shape]) -> int:
    total = 0
    for shape in shapes:
        n = 1
        for size in shape:
            n *= size
        total += n
    return total


def median_times(methods: Dict[str, Callable[[], None]], rounds: int, device: torch.device) -> Dict[str, float]:
    """Median seconds per call of each method, timed in alternation (one call each per round)
    after two warm-up rounds, so that drifts of the machine hit all methods alike."""
    def timed(fn: Callable[[], None]) -> float:
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
        return time.perf_counter() - start

    samples: Dict[str, List[float]] = {name: [] for name in methods}
    for round_ in range(rounds + 2):
        for name, fn in methods.items():
            seconds = timed(fn)
            if round_ >= 2:
                samples[name].append(seconds)
    return {name: statistics.median(values) for name, values in samples.items()}


def print_table(title: str, rows: List[dict], baseline: str) -> None:
    print(title)
    print(f"  {'method':<14}{'ms':>10}{'GB/s':>9}{'x limit':>9}{'speed-up':>10}")
    base = next(r['ms'] for r in rows if r['method'] == baseline)
    for r in rows:
        print(f"  {r['method']:<14}{r['ms']:>10.3f}{r['gb_per_s']:>9.1f}{r['x_limit']:>9.2f}{base / r['ms']:>9.1f}x")


def bench_workload(name: str, device: torch.device, rounds: int, momentum: float = 0.0002) -> List[dict]:
    shapes = WORKLOADS[name]()
    ema = [torch.randn(s, device=device) for s in shapes]
    src = [torch.randn(s, device=device) for s in shapes]
    total = numel(shapes)
    flat_a, flat_b = torch.randn(total, device=device), torch.randn(total, device=device)
    plan = EMAPlan(ema, src, rule='ema', momentum=momentum)
    steps = torch.ones((), dtype=torch.long, device=device)  # past the first (copying) call

    def loop():
        for e, s in zip(ema, src):
            if e.dtype.is_floating_point:
                e.lerp_(s.to(e.device), momentum)

    methods = {
        'loop': loop,
        'foreach': lambda: torch._foreach_lerp_(ema, src, momentum),
        'ema_update_': lambda: ema_update_(ema, src, momentum),
        'plan': lambda: plan.step(steps),
        'limit': lambda: flat_a.add_(flat_b, alpha=momentum),
    }
    times = median_times(methods, rounds, device)
    moved = 12 * total  # fp32: read EMA, read source, write EMA
    return [dict(workload=name, tensors=len(shapes), values=total, method=m, ms=t * 1e3, gb_per_s=moved / t / 1e9,
                 x_limit=t / times['limit']) for m, t in times.items()]


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """``--threads`` and ``--json``, which every ``minimm bench`` command takes."""
    parser.add_argument('--threads', type=int, default=None,
                        help="CPU threads (default: torch's); 1 gives steadier numbers on a busy "
                             'machine, where every parallel region waits for a core')
    parser.add_argument('--json', action='store_true', help='print the rows as JSON instead of tables')


def start(args: argparse.Namespace, device: torch.device, note: str = '') -> None:
    """Apply ``--threads``; for tables, say which device, threads and plan backend are measured."""
    if args.threads:
        torch.set_num_threads(args.threads)
    if not args.json:
        info = backend_info()[device.type]
        print(f'device {device}, {torch.get_num_threads()} threads, plan backend: {info["backend"]} '
              f'({info["reason"]}){note}')


def main(argv: Optional[List[str]] = None) -> List[dict]:
    parser = argparse.ArgumentParser(prog='minimm bench ema', description=__doc__.split('\n\n')[0])
    parser.add_argument('--workloads', nargs='+', default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--rounds', type=int, default=None,
                        help='timed rounds per workload (default: 20 for the large lists, 200 for small)')
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
            print_table(f"{name}: {r['tensors']} tensors, {r['values'] / 1e6:.1f} M values, median of {rounds}",
                        result, baseline='loop')
    if args.json:
        print(json.dumps(rows, indent=1))
    return rows


if __name__ == '__main__':
    main()
