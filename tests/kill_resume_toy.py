"""Test-only module for test_kill_resume.py, imported by its config through ``custom_imports``.

It registers the toy model and dataset, and two ways for the test to hold the training process
still at a known point, so that it can SIGKILL it there:

* ``KILL_TEST_PAUSE_AT_ITER=N``: after iteration N (1-based), print ``PAUSED`` and sleep;
* ``KILL_TEST_SLOW_SAVE_EPOCH=N``: while the checkpoint of epoch N is being written (its bytes
  are in minimm's temporary file, not yet renamed), print ``WRITING`` and sleep.
"""
import os
import time

import torch
from toy import ToyDataset, ToyModel

from minimm.hooks import Hook
from minimm.registry import DATASETS, HOOKS, MODELS

MODELS.register_module(name='KillTestToyModel', module=ToyModel, force=True)
DATASETS.register_module(name='KillTestToyDataset', module=ToyDataset, force=True)


def _hold(marker: str) -> None:
    print(marker, flush=True)
    time.sleep(600)  # the test kills the process long before this ends


@HOOKS.register_module(force=True)
class KillTestPauseHook(Hook):
    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        if str(runner.iter + 1) == os.environ.get('KILL_TEST_PAUSE_AT_ITER'):
            _hold('PAUSED')


_slow_save_epoch = os.environ.get('KILL_TEST_SLOW_SAVE_EPOCH')
if _slow_save_epoch:
    _torch_save = torch.save

    def _slow_save(obj, f, *args, **kwargs):
        _torch_save(obj, f, *args, **kwargs)
        if str(obj.get('meta', {}).get('epoch')) == _slow_save_epoch:
            f.flush()
            _hold('WRITING')

    torch.save = _slow_save
