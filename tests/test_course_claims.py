"""What the course says about MMEngine, checked on MMEngine itself.

The course promises that everything it does not mark **[minimm-only]** transfers, and where it
says "MMEngine does X" a learner takes it as a fact. Each claim below is three things:

* ``says`` — the words a chapter uses (white space folded). Checked always: a chapter that stops
  saying it fails here, so a claim and its check cannot drift apart unnoticed;
* ``mmengine`` — a snippet that sets ``result``, run against real MMEngine 0.10.7 when it is
  importable (as the peer suites, it is not installed by the test command: this part is skipped
  then; ``pip install mmengine==0.10.7`` into a side folder and put it on ``PYTHONPATH`` to run it);
* ``minimm`` — what minimm does at the same place (the same, or the marked difference), always run;
  ``SAME_CODE``: the MMEngine snippet itself, with ``mmengine`` read as ``minimm``.

The snippets of one library run together in one subprocess (importing MMEngine takes seconds).
"""
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, NamedTuple, Optional

import pytest

from course_claims_preludes import MODEL, TINY_RUN

# The EMAHook claim runs minimm's EMA, whose update is an op of either backend.
pytestmark = pytest.mark.ops_backend

REPO = Path(__file__).resolve().parent.parent
RESULT = '\x1e claim result \x1e'


SAME_CODE = 'the MMEngine snippet, on minimm'


class Claim(NamedTuple):
    chapter: str
    says: str
    mmengine: str
    expected_mmengine: object
    minimm: Optional[str] = None
    expected_minimm: object = None


CLAIMS: Dict[str, Claim] = {
    # First: it is about what an import has not done yet, and the snippets share one interpreter.
    'the root registries have no locations': Claim(
        '10_registry.md', "`'CheckpointHook' in HOOKS` is `False` there until something imports",
        """
from mmengine.registry import HOOKS
result = 'CheckpointHook' in HOOKS
""", False,
        SAME_CODE, True),
    'a mistyped CheckpointHook argument builds': Claim(
        '10_registry.md', "MMEngine's `CheckpointHook` takes `**kwargs`",
        """
import mmengine.hooks
from mmengine.registry import HOOKS
result = HOOKS.build(dict(type='CheckpointHook', intervall=1)).args
""", {'intervall': 1},
        """
from minimm.registry import HOOKS
try:
    HOOKS.build(dict(type='CheckpointHook', intervall=1))
    result = 'built'
except TypeError:
    result = 'TypeError'
""", 'TypeError'),
    'the "already registered" message': Claim(
        '10_registry.md', "MMEngine's message ends at `__main__`",
        """
from mmengine.registry import Registry
TRANSFORMS = Registry('transform')
TRANSFORMS.register_module(module=type('Scale', (), {}))
try:
    TRANSFORMS.register_module(module=type('Scale', (), {}))
except KeyError as e:
    result = e.args[0]
""", 'Scale is already registered in transform at __main__',
        SAME_CODE, 'Scale is already registered in transform at __main__; pass force=True to replace it'),
    'print(registry) draws a table': Claim(
        '10_registry.md', 'where MMEngine draws a table of names and classes',
        """
from mmengine.registry import Registry
shown = str(Registry('transform'))
result = 'Names' in shown and 'Objects' in shown
""", True,
        """
from minimm.registry import Registry
result = str(Registry('transform')).startswith('Registry of transform')
""", True),
    'an unknown priority name': Claim(
        '06_hooks_and_priority.md', "its `KeyError` holds just the name (`'BOGUS'`)",
        """
from mmengine.runner import get_priority
try:
    get_priority('BOGUS')
except KeyError as e:
    result = list(e.args)
""", ['BOGUS'],
        """
from minimm.runner import get_priority
try:
    get_priority('BOGUS')
except KeyError as e:
    result = e.args[0].startswith("unknown priority 'BOGUS'; use one of")
""", True),
    'a priority between the levels is shown as its number': Claim(
        '06_hooks_and_priority.md', '(49          ) Named',
        """
import tempfile
from mmengine.hooks import Hook
from mmengine.model import BaseModel
from mmengine.runner import Runner
""" + MODEL + """
class Named(Hook):
    def before_run(self, runner):
        pass
runner = Runner(model=M(), work_dir=tempfile.mkdtemp())
runner.register_hook(Named(), priority=49)
result = [line.strip() for line in runner.get_hooks_info().splitlines() if 'Named' in line]
""", ['(49          ) Named'],
        SAME_CODE, ['(49          ) Named']),
    'resume=True in a new work dir is not silent': Claim(
        '08_checkpoints_and_resume.md',
        'prints `Did not find last_checkpoint to be resumed.` and `Auto resumed from the latest '
        'checkpoint None.`, and trains from scratch',
        """
import contextlib
import io
import logging
import tempfile
from mmengine.model import BaseModel
from mmengine.runner import Runner
""" + MODEL + """
runner = Runner(model=M(), work_dir=tempfile.mkdtemp(), resume=True)
logged, printed = [], io.StringIO()
catcher = logging.Handler()
catcher.emit = lambda record: logged.append(record.getMessage())
runner.logger.addHandler(catcher)
with contextlib.redirect_stdout(printed):     # one of the two is a plain print
    runner.load_or_resume()
result = sorted(printed.getvalue().splitlines() + logged)
""", ['Auto resumed from the latest checkpoint None.',
      'Did not find last_checkpoint to be resumed.']),
    'MMEngine cannot read its own checkpoints on PyTorch >= 2.6': Claim(
        '08_checkpoints_and_resume.md', 'MMEngine cannot read its own checkpoints',
        """
import os
import tempfile
import torch
from mmengine.logging import MessageHub
from mmengine.runner.checkpoint import _load_checkpoint
hub = MessageHub.get_instance('claims')
hub.update_scalar('train/loss', 0.5)
path = os.path.join(tempfile.mkdtemp(), 'epoch_1.pth')
torch.save(dict(message_hub=hub.state_dict()), path)
try:
    _load_checkpoint(path)
    result = 'loaded'
except Exception as e:
    result = type(e).__name__
""", 'UnpicklingError',
        """
import os
import tempfile
import torch
from minimm.logging import MessageHub
hub = MessageHub.get_instance('claims')
hub.update_scalar('train/loss', 0.5)
path = os.path.join(tempfile.mkdtemp(), 'epoch_1.pth')
torch.save(dict(message_hub=hub.state_dict()), path)
result = sorted(torch.load(path, weights_only=True))
""", ['message_hub']),
    "RuntimeInfoHook reads the loss at every iteration": Claim(
        '12_builtin_hooks.md', "MMEngine's `RuntimeInfoHook` reads the loss at every iteration",
        """
from types import SimpleNamespace
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from mmengine.hooks import RuntimeInfoHook
from mmengine.logging import MessageHub
class Reads(TorchDispatchMode):
    count = 0
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        Reads.count += func is torch.ops.aten._local_scalar_dense.default
        return func(*args, **(kwargs or {}))
runner = SimpleNamespace(message_hub=MessageHub.get_instance('claims'))
with Reads():
    RuntimeInfoHook().after_train_iter(runner, 0, None, dict(loss=torch.tensor(0.5)))
result = Reads.count
""", 1,
        SAME_CODE, 0),
    'val_begin and dynamic_intervals': Claim(
        '05_runner_and_loops.md',
        "{'dynamic_intervals': [(4, 1)]} validates after epochs [2, 3, 4, 5]",
        TINY_RUN + """
class ValEpochs(Hook):
    def __init__(self):
        self.epochs = []

    def after_val_epoch(self, runner, metrics=None):
        self.epochs.append(runner.epoch)


result = []
for schedule in (dict(), dict(val_begin=3), dict(dynamic_intervals=[(4, 1)])):
    hook = ValEpochs()
    tiny_run([hook], dict(by_epoch=True, max_epochs=5, val_interval=2, **schedule),
             val_dataloader=DataLoader(DATA, batch_size=12), val_cfg=dict(),
             val_evaluator=[Count()], log_level='WARNING')
    result.append(hook.epochs)
""", [[2, 4, 5], [4, 5], [2, 3, 4, 5]],
        SAME_CODE, [[2, 4, 5], [4, 5], [2, 3, 4, 5]]),
    'save_begin starts the interval count': Claim(
        '08_checkpoints_and_resume.md',
        "interval=2, save_begin=1: ['epoch_1.pth', 'epoch_3.pth', 'epoch_4.pth']",
        TINY_RUN + """
import os
runner = tiny_run(train_cfg=dict(by_epoch=True, max_epochs=4), log_level='WARNING',
                  default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=2,
                                                     save_begin=1)))
result = sorted(f for f in os.listdir(runner.work_dir) if f.endswith('.pth'))
""", ['epoch_1.pth', 'epoch_3.pth', 'epoch_4.pth'],
        SAME_CODE, ['epoch_1.pth', 'epoch_3.pth', 'epoch_4.pth']),
    'EMAHook(begin_epoch=2) averages from the second epoch': Claim(
        '12_builtin_hooks.md', '`begin_epoch=2` with the second epoch',
        TINY_RUN + """
from mmengine.hooks import EMAHook
runner = tiny_run([dict(type='EMAHook', begin_epoch=2)], log_level='WARNING')
result = int(next(h for h in runner.hooks if isinstance(h, EMAHook)).ema_model.steps)
""", 12,
        SAME_CODE, 12),
    'how a log line averages a scalar': Claim(
        '12_builtin_hooks.md',
        'by_epoch=False, custom_cfg: Iter(train) [10/12] iter_number: 5.5000',
        TINY_RUN + """
import logging
import re


class IterNumber(Hook):
    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        runner.message_hub.update_scalar('train/iter_number', runner.iter + 1)


MEAN_OVER_ALL = dict(data_src='iter_number', method_name='mean', window_size='global')
result = []
for log_processor in (dict(), dict(mean_pattern=r'.*(loss|time|iter_number).*', window_size=4),
                      dict(by_epoch=False, custom_cfg=[MEAN_OVER_ALL])):
    runner = tiny_run([IterNumber()], dict(by_epoch=True, max_epochs=1), train=False,
                      log_processor=log_processor)
    lines = []
    catcher = logging.Handler()
    catcher.emit = lambda record: lines.append(record.getMessage())
    runner.logger.addHandler(catcher)
    runner.train()
    line = next(m for m in lines if '(train)' in m)
    result.append(line.split()[:2] + re.findall(r'iter_\\w+: \\S+', line))
""", [['Epoch(train)', '[1][10/12]', 'iter_number: 10'],
      ['Epoch(train)', '[1][10/12]', 'iter_number: 8.5000'],
      ['Iter(train)', '[10/12]', 'iter_number: 5.5000']],
        SAME_CODE, [['Epoch(train)', '[1][10/12]', 'iter_number: 10'],
                    ['Epoch(train)', '[1][10/12]', 'iter_number: 8.5000'],
                    ['Iter(train)', '[10/12]', 'iter_number: 5.5000']]),
    'rank 0 alone writes checkpoints and visualizer scalars': Claim(
        '14_several_processes.md', '`Runner.save_checkpoint` is wrapped in `master_only`',
        TINY_RUN + """
import glob
import os
from unittest import mock
runner = tiny_run(log_level='WARNING')
with mock.patch('mmengine.dist.utils.get_rank', return_value=1):   # as if on rank 1
    runner.save_checkpoint(runner.work_dir, 'on_rank_1.pth')
    runner.visualizer.add_scalars(dict(written_on_rank_1=1.0), step=1)
scalars = glob.glob(os.path.join(runner.log_dir, 'vis_data', 'scalars.json'))
result = [os.path.exists(os.path.join(runner.work_dir, 'on_rank_1.pth')),
          any('written_on_rank_1' in open(path).read() for path in scalars)]
""", [False, False],
        SAME_CODE, [False, False]),
    'MMEngine asks for FSDP two ways, on FSDP1': Claim(
        '14_several_processes.md', "with `model_wrapper_cfg=dict(type='MMFullyShardedDataParallel', "
        "...)` in the config, or `runner_type='FlexibleRunner'` with `strategy=dict(type="
        "'FSDPStrategy', ...)`, on torch's FSDP1",
        """
import mmengine.runner  # registers the wrappers, runners and strategies
from torch.distributed.fsdp import FullyShardedDataParallel
from mmengine.registry import MODEL_WRAPPERS, RUNNERS, STRATEGIES
result = [issubclass(MODEL_WRAPPERS.get('MMFullyShardedDataParallel'), FullyShardedDataParallel),
          RUNNERS.get('FlexibleRunner').__name__, STRATEGIES.get('FSDPStrategy').__name__]
""", [True, 'FlexibleRunner', 'FSDPStrategy'],
        """
from torch.distributed.fsdp import FullyShardedDataParallel
from minimm.registry import MODEL_WRAPPERS, RUNNERS, STRATEGIES
result = [issubclass(MODEL_WRAPPERS.get('MMFullyShardedDataParallel'), FullyShardedDataParallel),
          RUNNERS.get('FlexibleRunner').__name__, STRATEGIES.get('FSDPStrategy').__name__]
""", [False, 'FlexibleRunner', 'FSDPStrategy']),
    # Last: it starts (and ends) a one-process gloo group in the interpreter the snippets share.
    'an EMA of an FSDP2 model deep-copies it': Claim(
        '14_several_processes.md', "(MMEngine's and torch's EMAs deep-copy the model, which FSDP2 "
        "refuses)",
        """
import os
import socket
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.optim.swa_utils import AveragedModel
from mmengine.model import ExponentialMovingAverage
with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
dist.init_process_group('gloo', rank=0, world_size=1)
model = fully_shard(torch.nn.Linear(4, 4), mesh=init_device_mesh('cpu', (1, )))
result = []
for average in (ExponentialMovingAverage, AveragedModel):
    try:
        result.append(type(average(model).module.weight).__name__)
    except Exception as e:
        result.append(str(e))
dist.destroy_process_group()
""", ['FSDP does not support deepcopy. Please use state dict for serialization.'] * 2,
        SAME_CODE, ['DTensor', 'FSDP does not support deepcopy. Please use state dict for '
                               'serialization.']),
}


def minimm_code(claim: Claim) -> str:
    return claim.mmengine.replace('mmengine', 'minimm') if claim.minimm == SAME_CODE else claim.minimm


def run_snippets(snippets: Dict[str, str]) -> Dict[str, object]:
    """Run each snippet in one fresh interpreter, each in its own namespace; ``result`` of each."""
    program = ['import json, sys, textwrap', 'results = {}']
    for name, code in snippets.items():
        program.append(f'namespace = {{"__name__": "__main__"}}\n'
                       f'exec(textwrap.dedent({code!r}), namespace)\n'
                       f'results[{name!r}] = namespace["result"]')
    program.append(f'print({RESULT!r} + json.dumps(results))')
    done = subprocess.run([sys.executable, '-c', '\n'.join(program)], cwd=REPO, timeout=300,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.split(RESULT)[-1])


def fold(text: str) -> str:
    return re.sub(r'\s+', ' ', text)


@pytest.mark.parametrize('name', CLAIMS)
def test_the_chapter_still_says_it(name):
    claim = CLAIMS[name]
    chapter = (REPO / 'tutorials' / claim.chapter).read_text(encoding='utf-8')
    assert fold(claim.says) in fold(chapter), f'{claim.chapter} no longer says: {claim.says}'


@pytest.fixture(scope='module')
def minimm_results():
    return run_snippets({name: minimm_code(c) for name, c in CLAIMS.items() if c.minimm})


@pytest.fixture(scope='module')
def mmengine_results():
    spec = importlib.util.find_spec('mmengine')
    if spec is None:
        pytest.skip('MMEngine 0.10.7 is not installed (optional, as for the peer suites)')
    version = subprocess.run([sys.executable, '-c', 'import mmengine; print(mmengine.__version__)'],
                             capture_output=True, text=True).stdout.strip()
    if version != '0.10.7':
        pytest.skip(f'the claims are about MMEngine 0.10.7; this is {version or "not MMEngine"}')
    return run_snippets({name: c.mmengine for name, c in CLAIMS.items()})


@pytest.mark.parametrize('name', [n for n, c in CLAIMS.items() if c.minimm])
def test_what_minimm_does(name, minimm_results):
    assert minimm_results[name] == CLAIMS[name].expected_minimm


@pytest.mark.parametrize('name', CLAIMS)
def test_what_mmengine_does(name, mmengine_results):
    assert mmengine_results[name] == CLAIMS[name].expected_mmengine
