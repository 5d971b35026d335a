"""The shortcuts taken on the per-iteration path (issue 24 item 9) must not change what happens.

Each test checks the observable result against a plain oracle: which modules are in training mode
when a hook looks, whether an overridden ``train`` still runs, which records reach a handler, and
which tensors the preprocessor hands back.
"""
import logging
from collections import namedtuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from minimm.hooks import Hook
from minimm.logging import MMLogger
from minimm.model import BaseDataPreprocessor, BaseModel
from minimm.runner import Runner


class _Net(BaseModel):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.train_calls = 0

    def train(self, mode=True):
        self.train_calls += 1
        return super().train(mode)

    def forward(self, inputs, data_samples=None, mode='tensor'):
        out = self.fc(inputs)
        return dict(loss=F.cross_entropy(out, data_samples)) if mode == 'loss' else out


class _PlainNet(_Net):
    train = nn.Module.train  # no override: the loop may skip a train() that changes nothing


class _EvalAfterIter(Hook):
    """Puts the linear layer in eval mode after each iteration; records what it sees before."""

    def __init__(self):
        self.seen = []

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        self.seen.append([m.training for m in runner.model.modules()])

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        runner.model.fc.eval()


def _run(tmp_path, model, hooks, max_iters=4):
    data = TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8, )))
    runner = Runner(model=model, work_dir=str(tmp_path), custom_hooks=hooks,
                    train_dataloader=DataLoader(data, batch_size=2),
                    train_cfg=dict(by_epoch=False, max_iters=max_iters),
                    optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
                    default_hooks=dict(checkpoint=None), log_level='WARNING')
    runner.train()
    return runner


def test_every_iteration_starts_in_training_mode(tmp_path):
    hook = _EvalAfterIter()
    _run(tmp_path, _PlainNet(), [hook])
    assert hook.seen == [[True, True, True]] * 4  # model, fc, data_preprocessor


class _DeepNet(_PlainNet):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Sequential(nn.Identity()))


class _EvalDeepAfterIter(_EvalAfterIter):
    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        runner.model.body[0][0].eval()  # two levels down


def test_a_module_deep_inside_is_put_back_in_training_mode(tmp_path):
    hook = _EvalDeepAfterIter()
    _run(tmp_path, _DeepNet(), [hook])
    assert hook.seen == [[True] * 6] * 4  # model, fc, body, body[0], body[0][0], preprocessor


def test_an_overridden_train_is_called_before_every_iteration(tmp_path):
    model = _Net()
    _run(tmp_path, model, [], max_iters=5)
    assert model.train_calls >= 5


def test_a_logger_still_hands_each_record_to_the_handlers_that_take_it(tmp_path):
    logger = MMLogger.get_instance('fast_paths', log_level='WARNING')
    logger.removeHandler(logger.handlers[0])  # keep the test's output quiet
    got = []

    class _Keep(logging.Handler):
        def emit(self, record):
            got.append((record.levelname, record.getMessage()))

    logger.info('no handler takes me')  # none left: logging's lastResort decides, as before
    keep = _Keep(logging.WARNING)
    logger.addHandler(keep)
    logger.info('dropped')
    logger.warning('kept')
    keep.setLevel(logging.INFO)  # a handler's level changed later is seen at once
    logger.info('now kept')
    assert got == [('WARNING', 'kept'), ('INFO', 'now kept')]
    seen = []
    logger.addFilter(lambda record: seen.append(record.getMessage()) or True)
    keep.setLevel(logging.ERROR)
    logger.info('filtered')  # a logger filter sees every record, wanted or not
    assert seen == ['filtered'] and got[-1] == ('INFO', 'now kept')


def test_cast_data_keeps_structure_and_moves_only_what_is_elsewhere():
    pre = BaseDataPreprocessor()
    x, y = torch.ones(2), torch.zeros(2, dtype=torch.int64)
    pair = namedtuple('Pair', 'a b')
    data = dict(inputs=[x, (y, 'name')], meta=pair(x, None), tuple_=(x, ), list_=[y])
    out = pre.cast_data(data)
    assert out['inputs'][0] is x and out['inputs'][1][0] is y and out['inputs'][1][1] == 'name'
    assert type(out['inputs']) is list and type(out['inputs'][1]) is tuple
    assert type(out['meta']) is pair and out['meta'].a is x
    assert type(out['tuple_']) is tuple and type(out['list_']) is list
    assert out is not data and out['inputs'] is not data['inputs']  # containers are new
    half = pre.cast_data(x.to(torch.float64))  # same device, other dtype: untouched, as .to()
    assert half.dtype == torch.float64
    pre._device = torch.device('meta')
    moved = pre.cast_data([x])
    assert moved[0].device.type == 'meta'
