"""ClearMLLoggerHook, MMCV 1.7's: ``clearml`` in ``self.clearml`` (imported when the hook is
built), the task ``Task.init(**init_kwargs)`` starts in ``self.task`` and its logger in
``self.task_logger``; each tag is its own title and series, at ``iter + 1``. Left out:
nothing."""
from typing import Dict, Optional

from ...dist_utils import master_only

from ..hook import HOOKS
from .base import LoggerHook


@HOOKS.register_module()
class ClearMLLoggerHook(LoggerHook):
    """Log to ClearML; ``init_kwargs`` go to ``clearml.Task.init``."""

    def __init__(self, init_kwargs: Optional[Dict] = None, interval: int = 10,
                 ignore_last: bool = True, reset_flag: bool = False, by_epoch: bool = True):
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
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
        task_kwargs = self.init_kwargs if self.init_kwargs else {}
        self.task = self.clearml.Task.init(**task_kwargs)
        self.task_logger = self.task.get_logger()

    @master_only
    def log(self, runner) -> None:
        tags = self.get_loggable_tags(runner)
        for tag, val in tags.items():
            self.task_logger.report_scalar(tag, tag, val, self.get_iter(runner))
