"""TensorboardLoggerHook, MMCV 1.x's, through minimm's ``TensorboardVisBackend`` (by default into
``work_dir/tf_logs``; text values go to ``add_text``). Left out compared with MMCV 1.7:
tensorboardX."""
import os.path as osp

from ....logging.vis_backend import TensorboardVisBackend
from ..hook import HOOKS
from .base import BackendLoggerHook


@HOOKS.register_module()
class TensorboardLoggerHook(BackendLoggerHook):

    def __init__(self, log_dir=None, interval: int = 10, ignore_last: bool = True,
                 reset_flag: bool = False, by_epoch: bool = True):
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        self.log_dir = log_dir

    def make_backend(self, runner):
        self.log_dir = self.log_dir or osp.join(runner.work_dir, 'tf_logs')
        return TensorboardVisBackend(self.log_dir)

    def log(self, runner) -> None:
        if runner.rank != 0:
            return
        for tag, val in self.get_loggable_tags(runner, allow_text=True).items():
            if isinstance(val, str):
                self.backend.experiment.add_text(tag, val, self.get_iter(runner))
            else:
                self.backend.add_scalar(tag, val, self.get_iter(runner))
