"""IterTimerHook: ``data_time`` (waiting for the batch) and ``time`` (the whole iteration) into
``runner.log_buffer``, train and val alike, as MMCV 1.7's. Left out: nothing."""
import time

from .hook import HOOKS, Hook


@HOOKS.register_module()
class IterTimerHook(Hook):

    def before_epoch(self, runner) -> None:
        self.t = time.time()

    def before_iter(self, runner) -> None:
        runner.log_buffer.update({'data_time': time.time() - self.t})

    def after_iter(self, runner) -> None:
        runner.log_buffer.update({'time': time.time() - self.t})
        self.t = time.time()
