"""RuntimeInfoHook: keep the MessageHub's picture of the run (stage, epoch, iter, lr, loss) current.

Other hooks and the LogProcessor never ask the runner directly "which epoch is it, what is the
learning rate, what was the loss?": they read the MessageHub, and this hook (priority VERY_HIGH, so
before anyone else at each stage) writes it. The keys are MMEngine 0.10's contract:

============================  ==================================================================
stage                         writes
============================  ==================================================================
before_run                    info ``cfg`` (config text), ``seed``, ``experiment_name``,
                              ``minimm_version`` (MMEngine: ``mmengine_version``)
before_train                  info ``loop_stage='train'``, ``epoch``, ``iter``, ``max_epochs``,
                              ``max_iters``, ``dataset_meta`` (when the dataset has ``metainfo``)
before_train_epoch            info ``epoch``
before_train_iter             info ``iter``; scalar ``train/{name}`` = first value of each entry
                              of ``optim_wrapper.get_lr()``
after_train_iter              scalar ``train/{key}`` for each item of ``outputs``
before_val / after_val        info ``loop_stage='val'``; afterwards back to ``'train'`` when the
                              validation ran inside training, else removed
after_val_epoch / test        ``val/{key}``/``test/{key}``: scalar when it is one number, else info
before_test / after_test      set / remove ``loop_stage``
after_train                   remove ``loop_stage``
============================  ==================================================================
"""
from typing import Any, Dict, Optional

import numpy as np
import torch

from .. import __version__
from ..logging.vis_backend import config_pretty_text
from ..registry import HOOKS
from .hook import DATA_BATCH, Hook


def _is_scalar(value: Any) -> bool:
    """Whether ``value`` is one number: a Python or numpy number, or an array or tensor that
    holds exactly one element, whatever its shape."""
    if isinstance(value, torch.Tensor):
        elements = value.numel()
    elif isinstance(value, np.ndarray):
        elements = value.size
    else:
        return isinstance(value, (int, float, np.number))
    return elements == 1


@HOOKS.register_module()
class RuntimeInfoHook(Hook):
    """Write the runtime information the other hooks and the log processor read (see the table)."""

    priority = 'VERY_HIGH'
    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {
        'before_run': '-> message_hub:cfg message_hub:seed message_hub:experiment_name',
        'before_train': ('-> message_hub:loop_stage message_hub:epoch message_hub:iter '
                         'message_hub:max_* message_hub:dataset_meta'),
        'after_train before_val after_val before_test after_test': '-> message_hub:loop_stage',
        'before_train_epoch': '-> message_hub:epoch',
        'before_train_iter': 'lr -> message_hub:iter message_hub:train/lr',
        'after_train_iter': '-> message_hub:train/*',  # the losses train_step returned
        'after_val_epoch': 'metrics:* -> message_hub:val/*',
        'after_test_epoch': 'metrics:* -> message_hub:test/*',
    }

    def __init__(self):
        self.last_loop_stage: Optional[str] = None

    def before_run(self, runner) -> None:
        runner.message_hub.update_info_dict(dict(
            cfg=config_pretty_text(runner.cfg),
            seed=runner.seed,
            experiment_name=runner.experiment_name,
            minimm_version=__version__))
        self.last_loop_stage = None

    def before_train(self, runner) -> None:
        runner.message_hub.update_info_dict(dict(
            loop_stage='train', epoch=runner.epoch, iter=runner.iter,
            max_epochs=runner.max_epochs, max_iters=runner.max_iters))
        dataset = runner.train_dataloader.dataset
        if hasattr(dataset, 'metainfo'):
            runner.message_hub.update_info('dataset_meta', dataset.metainfo)

    def after_train(self, runner) -> None:
        runner.message_hub.pop_info('loop_stage')

    def before_train_epoch(self, runner) -> None:
        runner.message_hub.update_info('epoch', runner.epoch)

    def before_train_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None) -> None:
        runner.message_hub.update_info('iter', runner.iter)
        lr_dict = runner.optim_wrapper.get_lr()
        if not isinstance(lr_dict, dict):
            raise TypeError('`runner.optim_wrapper.get_lr()` should return a dict of learning '
                            f'rates, but got {type(lr_dict)}; check that the optim wrapper is an '
                            'OptimWrapper')
        for name, lr in lr_dict.items():
            runner.message_hub.update_scalar(f'train/{name}', lr[0])

    def after_train_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None,
                         outputs: Optional[dict] = None) -> None:
        if outputs is not None:
            for key, value in outputs.items():
                runner.message_hub.update_scalar(f'train/{key}', value)

    def before_val(self, runner) -> None:
        # Validation may run inside training (after an epoch) or alone (runner.val()).
        self.last_loop_stage = runner.message_hub.get_info('loop_stage')
        runner.message_hub.update_info('loop_stage', 'val')

    def after_val_epoch(self, runner, metrics: Optional[Dict[str, float]] = None) -> None:
        self._record_metrics(runner, 'val', metrics)

    def after_val(self, runner) -> None:
        # Inside training, the stage goes back to 'train'; after runner.val() alone, no stage is
        # left to name.
        was_training, self.last_loop_stage = self.last_loop_stage == 'train', None
        if was_training:
            runner.message_hub.update_info('loop_stage', 'train')
        else:
            runner.message_hub.pop_info('loop_stage')

    def before_test(self, runner) -> None:
        runner.message_hub.update_info('loop_stage', 'test')

    def after_test_epoch(self, runner, metrics: Optional[Dict[str, float]] = None) -> None:
        self._record_metrics(runner, 'test', metrics)

    def after_test(self, runner) -> None:
        runner.message_hub.pop_info('loop_stage')

    @staticmethod
    def _record_metrics(runner, mode: str, metrics: Optional[Dict[str, Any]]) -> None:
        """Numbers become scalars (so they get history), anything else (a matrix...) info."""
        for key, value in (metrics or {}).items():
            if _is_scalar(value):
                runner.message_hub.update_scalar(f'{mode}/{key}', value)
            else:
                runner.message_hub.update_info(f'{mode}/{key}', value)
