"""``minimm bench ema-hook``: what EMAHook costs per training iteration, inside the Runner.

The same Runner run (``IterBasedTrainLoop``, default hooks minus checkpointing) is repeated with
one of three hooks, and the wall time of that hook's ``after_train_iter`` call is recorded at every
iteration (the first iterations, which copy and build the plan, are dropped):

* ``EMAHook``: minimm's hook, ``ExponentialMovingAverage(momentum=0.0002)`` — one
  :class:`minimm.ops.EMAPlan` step per iteration;
* ``per-tensor``: MMEngine 0.10's way, written out below: a Python loop over the named
  parameters calling ``lerp_`` on each, then a loop copying each buffer, the step counter
  compared and incremented as a tensor;
* ``limit``: ``a.add_(b, alpha=m)`` over one flat tensor with as many values as the model — it
  reads and writes the same bytes as an EMA update (read EMA, read source, write EMA), so no EMA
  implementation can beat it by much.

Models (fp32, from the tensor lists of ``minimm bench ema``): ``small``, 2,000 tensors of 256
values; ``resnet50``, the 161 parameter tensors of ResNet-50 (25.6 M values). Their
``train_step`` is a stand-in for an optimizer step (every parameter is scaled in place), so each
hook reads freshly written weights, as after a real step.

On a GPU each hook call is timed between two synchronisations, so the numbers include the
kernels. Methods run in alternating rounds; each cell is the median over rounds of the per-round
median.
Columns as ``minimm bench ema``: ms per iteration, GB/s of the 12 bytes per value, the time as a
multiple of the limit, and the speed-up over ``per-tensor``. Absolute numbers depend on the
machine; read the ratios.
"""
import argparse
import copy
import json
import logging
import statistics
import tempfile
import time
from typing import Callable, Dict, List, Optional

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from ..hooks import EMAHook, Hook
from ..model import BaseModel
from .common import WORKLOADS, add_output_options, numel, print_table, start

MOMENTUM = 0.0002
WARMUP_ITERS = 3


class _ShapesModel(BaseModel):
    """Parameters of the given shapes and a stand-in optimizer step."""

    def __init__(self, shapes):
        super().__init__()
        self.weights = nn.ParameterList(nn.Parameter(torch.randn(s)) for s in shapes)

    def forward(self, inputs, data_samples=None, mode='tensor'):
        raise NotImplementedError('the benchmark only runs train_step')

    def train_step(self, data, optim_wrapper):
        with torch.no_grad():
            torch._foreach_mul_(list(self.weights), 0.9999)
        return dict(loss=torch.zeros(()))  # the train loop requires a 'loss' entry


class _PerTensorEMAHook(Hook):
    """MMEngine's EMAHook + ExponentialMovingAverage update, per tensor in Python."""

    def before_run(self, runner):
        self.src = runner.model
        self.ema = copy.deepcopy(runner.model).requires_grad_(False)
        self.avg_parameters = dict(self.ema.named_parameters())
        self.steps = torch.tensor(0)

    @torch.no_grad()
    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        src = dict(self.src.named_parameters())
        for name, p_avg in self.avg_parameters.items():
            p_src = src[name].detach()
            if self.steps == 0:
                p_avg.copy_(p_src)
            elif p_avg.dtype.is_floating_point:
                p_avg.lerp_(p_src, MOMENTUM)
        for b_avg, b_src in zip(self.ema.buffers(), self.src.buffers()):
            b_avg.copy_(b_src)
        self.steps += 1


class _LimitHook(Hook):
    """The bandwidth limit: one flat EMA-sized read-read-write per iteration."""

    def before_run(self, runner):
        total = sum(p.numel() for p in runner.model.parameters())
        device = next(runner.model.parameters()).device
        self.a, self.b = torch.randn(total, device=device), torch.randn(total, device=device)

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.a.add_(self.b, alpha=MOMENTUM)


METHODS: Dict[str, Callable[[], Hook]] = {
    'EMAHook': lambda: EMAHook(momentum=MOMENTUM),
    'per-tensor': _PerTensorEMAHook,
    'limit': _LimitHook,
}


def _time_hook_in_runner(model: nn.Module, hook: Hook, iters: int, work_dir: str) -> float:
    """Median seconds of ``hook.after_train_iter`` over a Runner run of ``iters`` iterations."""
    from ..runner import Runner
    samples: List[float] = []
    inner = hook.after_train_iter

    def timed(runner, **kwargs):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        start = time.perf_counter()
        inner(runner, **kwargs)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        samples.append(time.perf_counter() - start)

    # An instance attribute: the Runner dispatches to it like to the class's method.
    hook.after_train_iter = timed
    loader = DataLoader(TensorDataset(torch.zeros(8, 1)), batch_size=1)
    runner = Runner(model=model, work_dir=work_dir, train_dataloader=loader,
                    train_cfg=dict(by_epoch=False, max_iters=iters + WARMUP_ITERS),
                    optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.0)),
                    default_hooks=dict(checkpoint=None), custom_hooks=[hook],
                    log_level='WARNING')
    runner.train()
    return statistics.median(samples[WARMUP_ITERS:])


def bench_workload(name: str, iters: int, rounds: int) -> List[dict]:
    shapes = WORKLOADS[name].shapes()
    torch.manual_seed(0)
    model = _ShapesModel(shapes)
    times: Dict[str, List[float]] = {method: [] for method in METHODS}
    with tempfile.TemporaryDirectory() as work_dir:
        for round_ in range(rounds):
            for method, make_hook in METHODS.items():
                times[method].append(_time_hook_in_runner(model, make_hook(), iters,
                                                          f'{work_dir}/{round_}_{method}'))
    medians = {method: statistics.median(values) for method, values in times.items()}
    total = numel(shapes)
    moved = 12 * total  # fp32: read EMA, read source, write EMA
    return [dict(workload=name, tensors=len(shapes), values=total, method=method, ms=t * 1e3,
                 gb_per_s=moved / t / 1e9, x_limit=t / medians['limit'])
            for method, t in medians.items()]


def main(argv: Optional[List[str]] = None) -> List[dict]:
    parser = argparse.ArgumentParser(prog='minimm bench ema-hook',
                                     description=__doc__.split('\n\n')[0])
    parser.add_argument('--workloads', nargs='+', default=['small', 'resnet50'],
                        choices=[name for name, w in WORKLOADS.items() if w.dtype == torch.float32])
    parser.add_argument('--iters', type=int, default=None,
                        help='timed iterations per run (default: 200 for small, 20 otherwise)')
    parser.add_argument('--rounds', type=int, default=3, help='alternating runs per method')
    add_output_options(parser)
    args = parser.parse_args(argv)
    logging.getLogger('minimm').setLevel(logging.WARNING)
    # The Runner puts the model on the GPU when there is one.
    start(args, torch.device('cuda' if torch.cuda.is_available() else 'cpu'))
    rows = []
    for name in args.workloads:
        iters = args.iters or (200 if name == 'small' else 20)
        result = bench_workload(name, iters, args.rounds)
        rows += result
        if not args.json:
            r = result[0]
            print_table(f"{name}: {r['tensors']} tensors, {r['values'] / 1e6:.1f} M values, "
                        f'{args.rounds} rounds of {iters} iterations', result,
                        baseline='per-tensor')
    if args.json:
        print(json.dumps(rows, indent=1))
    return rows


if __name__ == '__main__':
    main()
