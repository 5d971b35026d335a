"""``minimm bench syncs``: how often does a training iteration make the host wait for the device?

The same toy training — a 2-layer MLP, batch 32, SGD, ``IterBasedTrainLoop`` of 200 iterations,
the default hooks with ``LoggerHook(interval=50)`` — is run under
``DeviceReads`` (minimm/runner/device_reads.py), in several configurations:

* **default hooks**;
* **+ EMAHook** (``ExponentialMovingAverage``);
* **+ clip_grad** (``clip_grad=dict(max_norm=1.0)``);
* **+ bf16 AMP** (``AmpOptimWrapper(dtype='bfloat16')``: autocast, no GradScaler);
* **all three**;
* on a GPU also **+ fp16 AMP**, whose ``GradScaler`` reads ``found_inf`` inside torch at every
  step (one read per iteration that only the scaler's own design could remove).

For each it prints the device reads per iteration (those of the iterations' hooks, model and
optimizer; set-up and the end of the run are not counted) and how many of them fell between log
lines (in an iteration that prints no log line). Columns: minimm with its native ops, minimm with
``MINIMM_NO_EXT=1`` (run in a subprocess), and MMEngine when ``import mmengine`` works in this
Python (the same code with ``mmengine`` imports; its ``AmpOptimWrapper`` needs a GPU, so that row
is left empty on the CPU). On the CPU the reads are counted with a dispatch mode, on a GPU with
``torch.cuda.set_sync_debug_mode``.
"""
import argparse
import importlib
import importlib.util
import json
import logging
import os
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from ..cli_args import help_text
from ..runner.device_reads import DeviceReads

ITERS, INTERVAL = 200, 50
CONFIGS = {
    'default hooks': {},
    '+ EMAHook': dict(ema=True),
    '+ clip_grad': dict(clip=True),
    '+ bf16 AMP': dict(amp='bfloat16'),
    'all three': dict(ema=True, clip=True, amp='bfloat16'),
}
if torch.cuda.is_available():  # fp16 has a GradScaler only on CUDA
    CONFIGS['+ fp16 AMP'] = dict(amp='float16')
FP16_NOTE = ('fp16 AMP (CUDA only) adds one read per iteration inside torch: GradScaler.step '
             'reads found_inf to decide whether to skip the step.')


def _model_class(engine: str):
    base = importlib.import_module(f'{engine}.model').BaseModel

    class MLP(base):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(32, 64), nn.Linear(64, 10)

        def forward(self, inputs, data_samples=None, mode='tensor'):
            logits = self.fc2(F.relu(self.fc1(inputs)))
            return dict(loss=F.cross_entropy(logits, data_samples)) if mode == 'loss' else logits
    return MLP


def _iteration_marks(engine: str, reads: DeviceReads, per_iter: List[int]) -> list:
    """Two hooks: the first of every ``before_train_iter`` and the last of every
    ``after_train_iter``; between them, the reads of one iteration."""
    hook_class = importlib.import_module(f'{engine}.hooks').Hook

    class Start(hook_class):
        priority = 'HIGHEST'

        def before_train_iter(self, runner, batch_idx, data_batch=None):
            per_iter.append(-reads.total)

    class End(hook_class):
        priority = 'LOWEST'

        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
            per_iter[-1] += reads.total
    return [Start(), End()]


def count(engine: str, config: dict, work_dir: str) -> Dict[str, float]:
    """Train the toy model with ``engine`` ('minimm' or 'mmengine') under a DeviceReads; the
    reads per iteration, and those that fell between log lines."""
    runner_class = importlib.import_module(f'{engine}.runner').Runner
    reads, per_iter = DeviceReads(), []
    g = torch.Generator().manual_seed(0)
    # One epoch of the dataloader is the whole run: an epoch's end would add a log line.
    data = TensorDataset(torch.randn(ITERS * 32, 32, generator=g),
                         torch.randint(0, 10, (ITERS * 32,), generator=g))
    optim_wrapper = dict(optimizer=dict(type='SGD', lr=0.01))
    if config.get('clip'):
        optim_wrapper['clip_grad'] = dict(max_norm=1.0)
    if config.get('amp'):
        optim_wrapper.update(type='AmpOptimWrapper', dtype=config['amp'])
    hooks = _iteration_marks(engine, reads, per_iter)
    if config.get('ema'):
        hooks.append(dict(type='EMAHook'))
    torch.manual_seed(0)
    runner = runner_class(
        model=_model_class(engine)(), work_dir=work_dir,
        train_dataloader=DataLoader(data, batch_size=32, shuffle=True),
        train_cfg=dict(by_epoch=False, max_iters=ITERS), optim_wrapper=optim_wrapper,
        param_scheduler=dict(type='ConstantLR', factor=1.0, by_epoch=False),
        default_hooks=dict(logger=dict(type='LoggerHook', interval=INTERVAL)),
        custom_hooks=hooks, log_level='WARNING')
    with reads:
        runner.train()
    between = sum(n for i, n in enumerate(per_iter) if (i + 1) % INTERVAL)
    return dict(per_iter=sum(per_iter) / len(per_iter), between=between)


def _column(engine: str, no_ext: bool) -> dict:
    """Run :func:`run` in a subprocess (its own ops backend, its own MessageHub and loggers)."""
    env = dict(os.environ)
    env.pop('MINIMM_NO_EXT', None)
    if no_ext:
        env['MINIMM_NO_EXT'] = '1'
    done = subprocess.run([sys.executable, '-m', 'minimm.bench.syncs', '--engine', engine,
                           '--json'], capture_output=True, text=True, env=env, timeout=1200)
    if done.returncode:
        raise RuntimeError(f'minimm bench syncs --engine {engine} failed:\n{done.stderr}')
    return json.loads(done.stdout.strip().splitlines()[-1])[engine]


def run(engine: str) -> dict:
    """Every configuration with one engine, in this process: ``{config: counts or error}``."""
    logging.getLogger(engine).setLevel(logging.ERROR)
    result = {}
    for name, config in CONFIGS.items():
        with tempfile.TemporaryDirectory() as work_dir:
            try:
                result[name] = count(engine, config, work_dir)
            except Exception as e:  # MMEngine's AmpOptimWrapper refuses a CPU-only machine
                result[name] = dict(error=f'{type(e).__name__}: {str(e).splitlines()[0]}')
    if engine == 'minimm':
        from ..ops import backend_info
        result['backend'] = backend_info()['cuda' if torch.cuda.is_available() else 'cpu']
    return result


def _cell(counts: dict) -> str:
    if 'error' in counts:
        return 'n/a'
    return f"{counts['per_iter']:.2f} ({counts['between']})"


def main(argv: Optional[List[str]] = None) -> dict:
    parser = argparse.ArgumentParser(prog='minimm bench syncs', description=help_text(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--engine', choices=['minimm', 'mmengine'], default=None,
                        help='count one engine in this process (default: every column)')
    parser.add_argument('--json', action='store_true', help='print JSON instead of a table')
    args = parser.parse_args(argv)
    if args.engine:
        columns = {args.engine: run(args.engine)}
    else:
        columns = {}
        if importlib.util.find_spec('mmengine') is not None:
            from mmengine import __version__
            columns[f'MMEngine {__version__}'] = _column('mmengine', False)
        columns['minimm (native ops)'] = _column('minimm', False)
        columns['minimm (MINIMM_NO_EXT=1)'] = _column('minimm', True)
    if args.json:
        print(json.dumps(columns))
        return columns
    how = DeviceReads('cuda' if torch.cuda.is_available() else 'dispatch').describe()
    print(f'Device reads per training iteration ({ITERS} iterations, a log line every '
          f'{INTERVAL});\nin brackets, how many fell between log lines. Counted with {how}.')
    width = max(len(name) for name in columns) + 2
    print(f'{"configuration":<16}' + ''.join(f'{name:>{width}}' for name in columns))
    for config in CONFIGS:
        print(f'{config:<16}' + ''.join(f'{_cell(col[config]):>{width}}'
                                        for col in columns.values()))
    print(FP16_NOTE)
    for name, col in columns.items():
        if col.get('backend', {}).get('backend', 'native') != 'native' and 'NO_EXT' not in name:
            print(f'{name}: the native ops are not loaded here ({col["backend"]["reason"]})')
        for config in CONFIGS:
            if 'error' in col[config]:
                print(f'{name}, {config}: {col[config]["error"]}')
    return columns


if __name__ == '__main__':
    main()
