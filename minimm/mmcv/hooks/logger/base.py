"""LoggerHook: when MMCV 1.x's logger hooks write, and what they read (``runner.log_buffer``).

Every ``interval`` iterations (and after a val epoch) a logger hook averages the buffer into
``log_buffer.output`` and calls ``log(runner)``, which a subclass writes; only the *last* logger
hook registered clears the output afterwards (``before_run`` sets its ``reset_flag``). The
``get_*`` helpers are what subclasses build their records from. As MMCV 1.7; left out: nothing.
"""
import numbers
from abc import abstractmethod
from typing import Dict

import numpy as np
import torch

from ..hook import Hook


class LoggerHook(Hook):
    """Base class for logger hooks.

    Args:
        interval: log every ``interval`` iterations.
        ignore_last: skip the last iterations of an epoch when fewer than ``interval``.
        reset_flag: clear ``log_buffer.output`` after logging.
        by_epoch: whether an ``EpochBasedRunner`` runs the hook.
    """

    def __init__(self, interval: int = 10, ignore_last: bool = True, reset_flag: bool = False,
                 by_epoch: bool = True):
        self.interval = interval
        self.ignore_last = ignore_last
        self.reset_flag = reset_flag
        self.by_epoch = by_epoch

    # MMCV spells the metaclass the Python 2 way, so ``log`` is marked but never enforced.
    @abstractmethod
    def log(self, runner):
        pass

    @staticmethod
    def is_scalar(val, include_np: bool = True, include_torch: bool = True) -> bool:
        """A number, a 0-d array, or a one-element tensor (``len`` of a 0-d tensor raises, as
        in MMCV)."""
        if isinstance(val, numbers.Number):
            return True
        elif include_np and isinstance(val, np.ndarray) and val.ndim == 0:
            return True
        elif include_torch and isinstance(val, torch.Tensor) and len(val) == 1:
            return True
        else:
            return False

    def get_mode(self, runner) -> str:
        if runner.mode == 'train':
            # An EvalHook's results arrive while training, without the timer's 'time'.
            if 'time' in runner.log_buffer.output:
                mode = 'train'
            else:
                mode = 'val'
        elif runner.mode == 'val':
            mode = 'val'
        else:
            raise ValueError(f"runner mode should be 'train' or 'val', but got {runner.mode}")
        return mode

    def get_epoch(self, runner) -> int:
        if runner.mode == 'train':
            epoch = runner.epoch + 1
        elif runner.mode == 'val':
            # the train epoch before this val epoch has already counted itself
            epoch = runner.epoch
        else:
            raise ValueError(f"runner mode should be 'train' or 'val', but got {runner.mode}")
        return epoch

    def get_iter(self, runner, inner_iter: bool = False) -> int:
        """The current training iteration, counted from 1."""
        if self.by_epoch and inner_iter:
            current_iter = runner.inner_iter + 1
        else:
            current_iter = runner.iter + 1
        return current_iter

    def get_lr_tags(self, runner) -> Dict[str, float]:
        tags = {}
        lrs = runner.current_lr()
        if isinstance(lrs, dict):
            for name, value in lrs.items():
                tags[f'learning_rate/{name}'] = value[0]
        else:
            tags['learning_rate'] = lrs[0]
        return tags

    def get_momentum_tags(self, runner) -> Dict[str, float]:
        tags = {}
        momentums = runner.current_momentum()
        if isinstance(momentums, dict):
            for name, value in momentums.items():
                tags[f'momentum/{name}'] = value[0]
        else:
            tags['momentum'] = momentums[0]
        return tags

    def get_loggable_tags(self, runner, allow_scalar: bool = True, allow_text: bool = False,
                          add_mode: bool = True,
                          tags_to_skip: tuple = ('time', 'data_time')) -> Dict:
        tags = {}
        for var, val in runner.log_buffer.output.items():
            if var in tags_to_skip:
                continue
            if self.is_scalar(val) and not allow_scalar:
                continue
            if isinstance(val, str) and not allow_text:
                continue
            if add_mode:
                var = f'{self.get_mode(runner)}/{var}'
            tags[var] = val
        tags.update(self.get_lr_tags(runner))
        tags.update(self.get_momentum_tags(runner))
        return tags

    def before_run(self, runner) -> None:
        for hook in runner.hooks[::-1]:
            if isinstance(hook, LoggerHook):
                hook.reset_flag = True
                break

    def before_epoch(self, runner) -> None:
        runner.log_buffer.clear()  # clear the logs of the last epoch

    def after_train_iter(self, runner) -> None:
        if self.by_epoch and self.every_n_inner_iters(runner, self.interval):
            runner.log_buffer.average(self.interval)
        elif not self.by_epoch and self.every_n_iters(runner, self.interval):
            runner.log_buffer.average(self.interval)
        elif self.end_of_epoch(runner) and not self.ignore_last:
            # the last `interval` entries, though fewer are new: not precise but more stable
            runner.log_buffer.average(self.interval)

        if runner.log_buffer.ready:
            self.log(runner)
            if self.reset_flag:
                runner.log_buffer.clear_output()

    def after_train_epoch(self, runner) -> None:
        if runner.log_buffer.ready:
            self.log(runner)
            if self.reset_flag:
                runner.log_buffer.clear_output()

    def after_val_epoch(self, runner) -> None:
        runner.log_buffer.average()
        self.log(runner)
        if self.reset_flag:
            runner.log_buffer.clear_output()
