"""Test-only module for test_sharded_checkpoint.py (imported by its configs through
``custom_imports``, so that ``minimm train`` under torchrun finds it too).

* ``ShardedToyModel``: two linear layers, no BatchNorm, so that a step is the same computation on
  any number of processes when the global batch is (each rank's loss is its batch's mean, and the
  gradients are averaged over the ranks).
* ``SHARDED_TEST_HOLD_SAVE=epoch_N.pth``: when that sharded checkpoint is complete in its hidden
  folder but not yet renamed into place, rank 0 prints ``WRITING`` and sleeps, for the test to
  SIGKILL it there.
"""
import os
import time

import torch.nn as nn
import torch.nn.functional as F

from toy import ToyDataset, ToyMetric

from minimm import sharded_checkpoint
from minimm.model import BaseModel
from minimm.registry import DATASETS, METRICS, MODELS

DATASETS.register_module(name='ShardedToyDataset', module=ToyDataset, force=True)
METRICS.register_module(name='ShardedToyMetric', module=ToyMetric, force=True)


@MODELS.register_module(force=True)
class ShardedToyModel(BaseModel):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

    def forward(self, inputs, data_samples=None, mode='tensor'):
        logits = self.layers(inputs)
        if mode == 'loss':
            return dict(loss=F.cross_entropy(logits, data_samples))
        if mode == 'predict':
            return [dict(pred_label=p, gt_label=t) for p, t in zip(logits.argmax(1), data_samples)]
        return logits


_hold_at = os.environ.get('SHARDED_TEST_HOLD_SAVE')
if _hold_at:
    _move = sharded_checkpoint._move_into_place

    def _held_move(tmp, filename):
        if os.path.basename(filename) == _hold_at:
            print('WRITING', flush=True)
            time.sleep(600)  # the test kills the processes long before this ends
        _move(tmp, filename)

    sharded_checkpoint._move_into_place = _held_move
