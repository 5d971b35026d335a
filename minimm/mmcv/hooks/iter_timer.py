"""IterTimerHook: how long each iteration took, and how much of it went into waiting for data.

One clock, restarted at the start of each epoch and after each iteration. Read just before an
iteration it gives ``data_time`` (the loader's share); read after it, ``time`` (the whole step).
Both go into ``runner.log_buffer``, for train and val alike, where logger hooks average them.
"""
import time

from .hook import HOOKS, Hook


@HOOKS.register_module()
class IterTimerHook(Hook):
    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {'before_train_epoch before_val_epoch': '',
                'before_train_iter before_val_iter': '-> log_buffer:data_time',
                'after_train_iter after_val_iter': '-> log_buffer:time'}

    def _elapsed(self):
        return time.time() - self.t

    def before_epoch(self, runner):
        self.t = time.time()

    def before_iter(self, runner):
        runner.log_buffer.update({'data_time': self._elapsed()})

    def after_iter(self, runner):
        runner.log_buffer.update({'time': self._elapsed()})
        self.t = time.time()
