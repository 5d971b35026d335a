"""What every ``minimm bench`` command shares: the workloads, the timing, the table and options.

Workloads are lists of parameter shapes written out (no model code needed), with the dtype of
the model's weights; the averaged copy (EMA) is always fp32:

* ``resnet50``: the 161 parameter tensors of ResNet-50 (25.6 M values);
* ``vit_b``: the 152 parameter tensors of ViT-B/16 (86.6 M values);
* ``small``: 2,000 tensors of 256 values (what a long list of biases and norms looks like);
* ``resnet50_bf16``: ResNet-50 trained in bf16 with an fp32 EMA (mixed-dtype pairs).

Timing alternates the methods in one process and takes medians, so drifts of the machine hit
all methods alike; on a GPU every call is timed between two synchronisations.
"""
import argparse
import contextlib
import os
import statistics
import time
from typing import Callable, Dict, List, NamedTuple, Tuple

import torch

from minimm.ops import backend_info

Shape = Tuple[int, ...]


def resnet50_shapes() -> List[Shape]:
    """Parameter shapes of torchvision's resnet50 in registration order (161 tensors)."""
    shapes: List[Shape] = [(64, 3, 7, 7), (64,), (64,)]
    in_channels = 64
    for width, blocks in zip((64, 128, 256, 512), (3, 4, 6, 3)):
        for block in range(blocks):
            shapes += [(width, in_channels, 1, 1), (width,), (width,),
                       (width, width, 3, 3), (width,), (width,),
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
        shapes += [(d,), (d,), (3 * d, d), (3 * d,), (d, d), (d,),
                   (d,), (d,), (4 * d, d), (4 * d,), (d, 4 * d), (d,)]
    return shapes + [(d,), (d,), (1000, d), (1000,)]


class Workload(NamedTuple):
    shapes: Callable[[], List[Shape]]
    dtype: torch.dtype = torch.float32  # of the model's weights; the EMA is fp32


WORKLOADS: Dict[str, Workload] = {
    'resnet50': Workload(resnet50_shapes),
    'vit_b': Workload(vit_b_shapes),
    'small': Workload(lambda: [(256,)] * 2000),
    'resnet50_bf16': Workload(resnet50_shapes, torch.bfloat16),
}


def numel(shapes: List[Shape]) -> int:
    total = 0
    for shape in shapes:
        n = 1
        for size in shape:
            n *= size
        total += n
    return total


def median_times(methods: Dict[str, Callable[[], None]], rounds: int,
                 device: torch.device) -> Dict[str, float]:
    """Median seconds per call of each method, timed in alternation (one call each per round)
    after two warm-up rounds."""
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
    """Columns: ms per call, GB/s of the bytes an update must move, the time as a multiple of the
    limit, and the speed-up over ``baseline``."""
    print(title)
    print(f"  {'method':<14}{'ms':>10}{'GB/s':>9}{'x limit':>9}{'speed-up':>10}")
    base = next(r['ms'] for r in rows if r['method'] == baseline)
    for r in rows:
        print(f"  {r['method']:<14}{r['ms']:>10.3f}{r['gb_per_s']:>9.1f}{r['x_limit']:>9.2f}"
              f"{base / r['ms']:>9.1f}x")


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """``--threads`` and ``--json``, which every ``minimm bench`` command takes."""
    parser.add_argument('--threads', type=int, default=None,
                        help="CPU threads (default: torch's); 1 gives steadier numbers on a busy "
                             'machine, where every parallel region waits for a core')
    parser.add_argument('--json', action='store_true',
                        help='print the rows as JSON instead of tables')


def start(args: argparse.Namespace, device: torch.device, note: str = '') -> None:
    """Apply ``--threads``; for tables, say which device, threads and plan backend are measured."""
    if args.threads:
        torch.set_num_threads(args.threads)
    if not args.json:
        info = backend_info()[device.type]
        print(f'device {device}, {torch.get_num_threads()} threads, '
              f'plan backend: {info["backend"]} ({info["reason"]}){note}')
        warning = unreliable(device)
        if warning:
            print(warning)


def unreliable(device: torch.device) -> str:
    """Why this machine's CPU timings are unreliable (few cores, or busy ones), or ''. Ratios
    against the bandwidth limit ('x limit') suffer most: other processes share the memory bus."""
    if device.type != 'cpu':
        return ''
    cores = os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, 'getloadavg') else 0.0
    reasons = ([f'only {cores} CPU cores'] if cores < 4 else []) + (
        [f'a load average of {load:.1f} on {cores} cores'] if load > 0.5 * cores else [])
    if not reasons:
        return ''
    return (f'NOTE: {" and ".join(reasons)}: the times below are noisy and the ratios may be off '
            'by a wide margin; rerun on an idle machine with more cores before relying on them')


@contextlib.contextmanager
def local_gloo_group(rank: int, world_size: int, port: int):
    """This process as rank ``rank`` of a gloo group on this machine (the benches' spawned
    workers), left when the block ends; one thread each, since the ranks share the cores."""
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    try:
        yield
    finally:
        dist.destroy_process_group()
