"""TensorboardLoggerHook: MMCV 1.x's logger for TensorBoard.

``torch.utils.tensorboard.SummaryWriter`` is built before the run into ``self.writer``, writing
to ``log_dir`` (default ``work_dir/tf_logs``). Each tag becomes its own chart, its x the global
iteration counted from 1; text values go to the TEXT tab. Left out compared with MMCV 1.7: the
tensorboardX fallback of PyTorch < 1.1 and parrots.
"""
import os.path as osp
from typing import Optional

from ...dist_utils import master_only
from ..hook import HOOKS
from .base import LoggerHook


@HOOKS.register_module()
class TensorboardLoggerHook(LoggerHook):
    """Log to TensorBoard; ``log_dir`` defaults to ``runner.work_dir/tf_logs``."""

    def __init__(self, log_dir: Optional[str] = None, interval: int = 10,
                 ignore_last: bool = True, reset_flag: bool = False, by_epoch: bool = True):
        super().__init__(interval=interval, ignore_last=ignore_last, reset_flag=reset_flag,
                         by_epoch=by_epoch)
        self.log_dir = log_dir

    @master_only
    def before_run(self, runner) -> None:
        super().before_run(runner)
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ImportError('Please run "pip install future tensorboard" to install the '
                              'dependencies to use torch.utils.tensorboard (applicable to '
                              'PyTorch 1.1 or higher)')
        self.log_dir = self.log_dir or osp.join(runner.work_dir, 'tf_logs')
        self.writer = SummaryWriter(self.log_dir)

    @master_only
    def log(self, runner) -> None:
        step = self.get_iter(runner)
        for tag, value in self.get_loggable_tags(runner, allow_text=True).items():
            add = self.writer.add_text if isinstance(value, str) else self.writer.add_scalar
            add(tag, value, step)

    @master_only
    def after_run(self, runner) -> None:
        self.writer.close()
