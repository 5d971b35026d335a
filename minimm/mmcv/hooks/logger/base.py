"""LoggerHook: the part every MMCV 1.x logger shares, *when* to write and *what* to read.

The runner's IterTimerHook and ``train_step`` fill ``runner.log_buffer`` with one value per
iteration. Every ``interval`` iterations a logger hook asks the buffer for the mean of the last
``interval`` values (``log_buffer.output``) and calls ``log(runner)``; a subclass decides where
that record goes (console, TensorBoard, W&B...). Several loggers read the same output, so only the
last one registered clears it (``before_run`` hands it ``reset_flag``). The ``get_*`` helpers
below are the building blocks subclasses make their records from.
"""
import numbers
from abc import abstractmethod
from typing import Dict

import numpy as np
import torch

from ..hook import Hook


def _check_mode(runner) -> None:
    if runner.mode not in ('train', 'val'):
        raise ValueError(f"runner mode should be 'train' or 'val', but got {runner.mode}")


def _first_group(name: str, per_group) -> Dict[str, float]:
    """``{name: value of param group 0}``, or one ``name/<optimizer>`` entry per optimizer when
    the runner holds a dict of them."""
    if isinstance(per_group, dict):
        return {f'{name}/{optim}': values[0] for optim, values in per_group.items()}
    return {name: per_group[0]}


class LoggerHook(Hook):
    """Base class of the logger hooks; subclasses write ``log``.

    Args:
        interval: log every ``interval`` iterations.
        ignore_last: at the end of an epoch, skip the iterations that do not fill an interval.
        reset_flag: clear ``log_buffer.output`` after logging.
        by_epoch: count ``interval`` within the epoch (``runner.inner_iter``), not globally.
    """

    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {
        'before_run after_run': '',  # open and close a service's run
        'before_train_epoch before_val_epoch': '-> log_buffer:*',  # cleared
        'after_train_iter after_train_epoch after_val_epoch': 'log_buffer:* lr ->',
    }

    def __init__(self, interval: int = 10, ignore_last: bool = True, reset_flag: bool = False,
                 by_epoch: bool = True):
        self.interval = interval
        self.ignore_last = ignore_last
        self.reset_flag = reset_flag
        self.by_epoch = by_epoch

    @staticmethod
    def is_scalar(val, include_np: bool = True, include_torch: bool = True) -> bool:
        """Python numbers, 0-d arrays and one-element tensors count as scalars. A 0-d tensor
        makes ``len`` raise TypeError, as it does in MMCV."""
        if isinstance(val, torch.Tensor):
            return include_torch and len(val) == 1
        if isinstance(val, np.ndarray):
            return include_np and val.ndim == 0
        return isinstance(val, numbers.Number)

    # --- what a record is made of -------------------------------------------------------------

    def get_mode(self, runner) -> str:
        _check_mode(runner)
        # EvalHook writes its results while the runner is still in train mode; only the
        # IterTimerHook adds 'time', so a train-mode record without it holds val results.
        has_time = 'time' in runner.log_buffer.output
        return 'train' if runner.mode == 'train' and has_time else 'val'

    def get_epoch(self, runner) -> int:
        _check_mode(runner)
        # Counting from 1: in train mode the epoch in progress; a val epoch comes after the
        # train epoch, which has already moved runner.epoch on.
        return runner.epoch + 1 if runner.mode == 'train' else runner.epoch

    def get_iter(self, runner, inner_iter: bool = False) -> int:
        """The iteration counted from 1: within the epoch if asked (and ``by_epoch``), else the
        global one."""
        within_epoch = self.by_epoch and inner_iter
        return (runner.inner_iter if within_epoch else runner.iter) + 1

    def get_lr_tags(self, runner) -> Dict[str, float]:
        return _first_group('learning_rate', runner.current_lr())

    def get_momentum_tags(self, runner) -> Dict[str, float]:
        return _first_group('momentum', runner.current_momentum())

    def get_loggable_tags(self, runner, allow_scalar: bool = True, allow_text: bool = False,
                          add_mode: bool = True,
                          tags_to_skip: tuple = ('time', 'data_time')) -> Dict:
        """The buffer's output as ``{tag: value}`` (keys prefixed with the mode if asked), then
        the learning rates and momenta, which never get a prefix."""
        prefix = f'{self.get_mode(runner)}/' if add_mode else ''
        tags = {}
        for key, value in runner.log_buffer.output.items():
            unwanted = (key in tags_to_skip or (self.is_scalar(value) and not allow_scalar)
                        or (isinstance(value, str) and not allow_text))
            if not unwanted:
                tags[prefix + key] = value
        return {**tags, **self.get_lr_tags(runner), **self.get_momentum_tags(runner)}

    # --- when to write ------------------------------------------------------------------------

    # MMCV declares no ABCMeta, so a subclass without ``log`` can still be built.
    @abstractmethod
    def log(self, runner):
        """Write the current record (``get_loggable_tags``) somewhere: each subclass's job."""

    def _write_and_reset(self, runner) -> None:
        self.log(runner)
        if self.reset_flag:
            runner.log_buffer.clear_output()

    def before_run(self, runner) -> None:
        loggers = [hook for hook in runner.hooks if isinstance(hook, LoggerHook)]
        if loggers:
            loggers[-1].reset_flag = True  # everyone before it has read the output by then

    def before_epoch(self, runner) -> None:
        runner.log_buffer.clear()  # the averages of one epoch never mix with the next

    def after_train_iter(self, runner) -> None:
        if self.by_epoch:
            interval_done = self.every_n_inner_iters(runner, self.interval)
        else:
            interval_done = self.every_n_iters(runner, self.interval)
        partial_tail = self.end_of_epoch(runner) and not self.ignore_last
        if interval_done or partial_tail:
            # A partial tail still averages the last `interval` values, some already logged:
            # MMCV's choice, smoother than a mean of one or two iterations.
            runner.log_buffer.average(self.interval)
        if runner.log_buffer.ready:
            self._write_and_reset(runner)

    def after_train_epoch(self, runner) -> None:
        if runner.log_buffer.ready:
            self._write_and_reset(runner)

    def after_val_epoch(self, runner) -> None:
        runner.log_buffer.average()  # the whole val epoch in one record
        self._write_and_reset(runner)
