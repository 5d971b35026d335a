"""TensorboardLoggerHook, MMCV 1.x's: ``torch.utils.tensorboard``'s ``SummaryWriter`` in
``self.writer``, by default into ``work_dir/tf_logs``; text values go to ``add_text``, the rest to
``add_scalar``, at ``iter + 1``. Left out compared with MMCV 1.7: the tensorboardX path of
torch < 1.1 and parrots."""
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
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
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

        if self.log_dir is None:
            self.log_dir = osp.join(runner.work_dir, 'tf_logs')
        self.writer = SummaryWriter(self.log_dir)

    @master_only
    def log(self, runner) -> None:
        tags = self.get_loggable_tags(runner, allow_text=True)
        for tag, val in tags.items():
            if isinstance(val, str):
                self.writer.add_text(tag, val, self.get_iter(runner))
            else:
                self.writer.add_scalar(tag, val, self.get_iter(runner))

    @master_only
    def after_run(self, runner) -> None:
        self.writer.close()
