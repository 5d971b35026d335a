"""LoggerHook: when MMCV 1.x's logger hooks write, and what they read (``runner.log_buffer``).

Every ``interval`` iterations (and after a val epoch) a logger hook averages the buffer into
``log_buffer.output`` and calls ``log(runner)``; only the *last* one registered clears it. The
backend hooks (``BackendLoggerHook``; ``ServiceLoggerHook`` for those set up by ``init_kwargs``)
write through minimm's MMEngine-style visualisation backends, on rank 0. Left out: nothing.
"""
import numbers

import numpy as np
import torch

from ..hook import Hook


class LoggerHook(Hook):

    def __init__(self, interval: int = 10, ignore_last: bool = True, reset_flag: bool = False,
                 by_epoch: bool = True):
        self.interval, self.ignore_last = interval, ignore_last
        self.reset_flag, self.by_epoch = reset_flag, by_epoch

    def log(self, runner) -> None:
        raise NotImplementedError

    @staticmethod
    def is_scalar(val, include_np: bool = True, include_torch: bool = True) -> bool:
        return isinstance(val, numbers.Number) \
            or include_np and isinstance(val, np.ndarray) and val.ndim == 0 \
            or include_torch and isinstance(val, torch.Tensor) and len(val) == 1

    @staticmethod
    def _check_mode(runner) -> None:
        if runner.mode not in ('train', 'val'):
            raise ValueError(f"runner mode should be 'train' or 'val', but got {runner.mode}")

    def get_mode(self, runner) -> str:
        self._check_mode(runner)
        # An EvalHook's results arrive while runner.mode is 'train' but without a 'time' entry.
        return 'train' if runner.mode == 'train' and 'time' in runner.log_buffer.output else 'val'

    def get_epoch(self, runner) -> int:
        self._check_mode(runner)
        # In val the train epoch has already counted itself.
        return runner.epoch + 1 if runner.mode == 'train' else runner.epoch

    def get_iter(self, runner, inner_iter: bool = False) -> int:
        return runner.inner_iter + 1 if self.by_epoch and inner_iter else runner.iter + 1

    @staticmethod
    def _first_group_tags(name: str, values) -> dict:
        if isinstance(values, dict):
            return {f'{name}/{key}': value[0] for key, value in values.items()}
        return {name: values[0]}

    def get_lr_tags(self, runner) -> dict:
        return self._first_group_tags('learning_rate', runner.current_lr())

    def get_momentum_tags(self, runner) -> dict:
        return self._first_group_tags('momentum', runner.current_momentum())

    def get_loggable_tags(self, runner, allow_scalar: bool = True, allow_text: bool = False,
                          add_mode: bool = True, tags_to_skip=('time', 'data_time')) -> dict:
        tags = {}
        for var, val in runner.log_buffer.output.items():
            if var in tags_to_skip or (self.is_scalar(val) and not allow_scalar) or \
                    (isinstance(val, str) and not allow_text):
                continue
            tags[f'{self.get_mode(runner)}/{var}' if add_mode else var] = val
        tags.update(self.get_lr_tags(runner))
        tags.update(self.get_momentum_tags(runner))
        return tags

    def before_run(self, runner) -> None:
        for hook in runner.hooks[::-1]:
            if isinstance(hook, LoggerHook):
                hook.reset_flag = True
                break

    def before_epoch(self, runner) -> None:
        runner.log_buffer.clear()

    def _log_and_reset(self, runner) -> None:
        self.log(runner)
        if self.reset_flag:
            runner.log_buffer.clear_output()

    def after_train_iter(self, runner) -> None:
        if self.by_epoch and self.every_n_inner_iters(runner, self.interval) or \
                not self.by_epoch and self.every_n_iters(runner, self.interval) or \
                self.end_of_epoch(runner) and not self.ignore_last:
            runner.log_buffer.average(self.interval)  # at the epoch end: still the last interval
        if runner.log_buffer.ready:
            self._log_and_reset(runner)

    def after_train_epoch(self, runner) -> None:
        if runner.log_buffer.ready:
            self._log_and_reset(runner)

    def after_val_epoch(self, runner) -> None:
        runner.log_buffer.average()
        self._log_and_reset(runner)


class BackendLoggerHook(LoggerHook):
    """Writes ``get_loggable_tags`` through the visualisation backend ``make_backend`` returns."""

    def make_backend(self, runner):
        raise NotImplementedError

    def before_run(self, runner) -> None:
        super().before_run(runner)
        if runner.rank == 0:
            self.backend = self.make_backend(runner)

    def get_step(self, runner) -> int:
        return self.get_iter(runner)

    def log(self, runner) -> None:
        tags = self.get_loggable_tags(runner)
        if runner.rank == 0 and tags:
            self.backend.add_scalars(tags, step=self.get_step(runner))

    def after_run(self, runner) -> None:
        if runner.rank == 0:
            self.backend.close()


class ServiceLoggerHook(BackendLoggerHook):
    """The hook of a tracking service (ClearML, Neptune, W&B): ``init_kwargs`` configure it."""

    def __init__(self, init_kwargs=None, interval: int = 10, ignore_last: bool = True,
                 reset_flag: bool = False, by_epoch: bool = True):
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        self.init_kwargs = init_kwargs
