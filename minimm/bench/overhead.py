"""``minimm bench overhead``: what does the framework cost per iteration?

The same tiny training — a 2-layer MLP on 4,096 random samples, batch 32, SGD — is run, in one
process and alternating rounds, three ways:

* **bare**: a hand-written PyTorch loop (dataloader, forward, loss, backward, step, zero_grad);
* **runner**: ``Runner.train()`` with an IterBasedTrainLoop and *all* default hooks (runtime
  info, timer, sampler seed, logger every 10 iterations, parameter scheduler, checkpoint at the
  end), the model a ``BaseModel`` that computes the same loss;
* **runner, no hooks**: the same with every default hook removed (``default_hooks`` all None), so
  that the two runner rows split the cost between the loop and model protocol
  (``train_step``, the OptimWrapper) and the hooks.

It prints the median time per iteration of each and its ratio to the bare loop. The ratios are the
numbers to look at; absolute times depend on the machine.
"""
import argparse
import json
import logging
import statistics
import tempfile
import time
from typing import List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from ..cli_args import help_text
from ..model import BaseModel


class _MLP(BaseModel):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 10)

    def logits(self, x):
        return self.fc2(F.relu(self.fc1(x)))

    def forward(self, inputs, data_samples=None, mode='tensor'):
        logits = self.logits(inputs)
        if mode == 'loss':
            return dict(loss=F.cross_entropy(logits, data_samples))
        return logits


def _loader(batch_size: int) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, 32, generator=g)
    y = torch.randint(0, 10, (4096, ), generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=True, drop_last=True)


def _bare(iters: int, batch_size: int) -> float:
    torch.manual_seed(0)
    model = _MLP()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = _loader(batch_size)
    start = time.perf_counter()
    done = 0
    while done < iters:
        for x, y in loader:
            loss = F.cross_entropy(model.logits(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            done += 1
            if done == iters:
                break
    return (time.perf_counter() - start) / iters


def _runner(iters: int, batch_size: int, work_dir: str, hooks: bool = True) -> float:
    from ..runner import Runner
    from ..runner.hook_dispatch import DEFAULT_HOOKS
    torch.manual_seed(0)
    runner = Runner(model=_MLP(), work_dir=work_dir, train_dataloader=_loader(batch_size),
                    train_cfg=dict(by_epoch=False, max_iters=iters),
                    optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.01)),
                    param_scheduler=dict(type='ConstantLR', factor=1.0, by_epoch=False),
                    default_hooks=None if hooks else dict.fromkeys(DEFAULT_HOOKS),
                    log_level='WARNING')
    start = time.perf_counter()
    runner.train()
    return (time.perf_counter() - start) / iters


def run(iters: int = 2000, batch_size: int = 32, rounds: int = 5) -> dict:
    """Alternate bare and runner rounds; return medians (microseconds per iteration) and the
    ratios to the bare loop (``ratio``: the runner with its default hooks)."""
    torch.set_num_threads(1)  # all sides single-threaded: the overhead is Python, not math
    logging.getLogger('minimm').setLevel(logging.WARNING)
    bare: List[float] = []
    full: List[float] = []
    no_hooks: List[float] = []
    with tempfile.TemporaryDirectory() as work_dir:
        _bare(200, batch_size)  # warm-up: allocator, autograd, dataloader code paths
        _runner(50, batch_size, f'{work_dir}/warm-up')  # and the runner's imports
        for i in range(rounds):
            bare.append(_bare(iters, batch_size))
            full.append(_runner(iters, batch_size, f'{work_dir}/{i}'))
            no_hooks.append(_runner(iters, batch_size, f'{work_dir}/{i}-no-hooks', hooks=False))
    b, r, n = (statistics.median(times) for times in (bare, full, no_hooks))
    return dict(iters=iters, batch_size=batch_size, rounds=rounds, bare_us=b * 1e6,
                runner_us=r * 1e6, ratio=r / b, no_hooks_us=n * 1e6, no_hooks_ratio=n / b)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog='minimm bench overhead', description=help_text(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--iters', type=int, default=2000, help='iterations per round')
    parser.add_argument('--batch-size', type=int, default=32)
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument('--json', action='store_true', help='print JSON instead of a table')
    args = parser.parse_args(argv)
    result = run(args.iters, args.batch_size, args.rounds)
    if args.json:
        print(json.dumps(result))
        return
    print(f'{"loop":<28} {"us/iter":>10} {"ratio":>8}')
    print(f'{"bare PyTorch":<28} {result["bare_us"]:>10.1f} {1.0:>8.2f}')
    print(f'{"Runner + default hooks":<28} {result["runner_us"]:>10.1f} {result["ratio"]:>8.2f}')
    print(f'{"Runner, no hooks":<28} {result["no_hooks_us"]:>10.1f} '
          f'{result["no_hooks_ratio"]:>8.2f}')
    print(f'({args.rounds} alternating rounds of {args.iters} iterations, medians)')


if __name__ == '__main__':
    main()
