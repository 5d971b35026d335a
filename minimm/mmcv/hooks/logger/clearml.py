"""ClearMLLoggerHook: MMCV 1.7's logger for ClearML.

``clearml`` is imported when the hook is built, into ``self.clearml``. Before the run,
``clearml.Task.init(**init_kwargs)`` starts ``self.task``, whose logger is ``self.task_logger``;
each tag is then reported as a scalar of its own (title and series both the tag) at the global
iteration counted from 1.
"""
from typing import Dict, Optional

from ...dist_utils import master_only
from ..hook import HOOKS
from .base import LoggerHook


@HOOKS.register_module()
class ClearMLLoggerHook(LoggerHook):
    """Log to ClearML; ``init_kwargs`` go to ``clearml.Task.init``."""

    def __init__(self, init_kwargs: Optional[Dict] = None, interval: int = 10,
                 ignore_last: bool = True, reset_flag: bool = False, by_epoch: bool = True):
        super().__init__(interval=interval, ignore_last=ignore_last, reset_flag=reset_flag,
                         by_epoch=by_epoch)
        self.import_clearml()
        self.init_kwargs = init_kwargs

    def import_clearml(self):
        try:
            import clearml
        except ImportError:
            raise ImportError('Please run "pip install clearml" to install clearml')
        self.clearml = clearml

    @master_only
    def before_run(self, runner) -> None:
        super().before_run(runner)
        self.task = self.clearml.Task.init(**(self.init_kwargs or {}))
        self.task_logger = self.task.get_logger()

    @master_only
    def log(self, runner) -> None:
        step = self.get_iter(runner)
        for tag, value in self.get_loggable_tags(runner).items():
            self.task_logger.report_scalar(tag, tag, value, step)
