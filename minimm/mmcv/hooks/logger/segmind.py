"""SegmindLoggerHook, MMCV 1.7's: the ``segmind`` package's MLflow-style tracking, stepped by
``runner.epoch``. No MMEngine backend exists for it, so it calls the package. Left out: nothing."""
from minimm.logging.vis_backend import import_optional

from ..hook import HOOKS
from .base import LoggerHook


@HOOKS.register_module()
class SegmindLoggerHook(LoggerHook):

    def before_run(self, runner) -> None:
        super().before_run(runner)
        import_optional('segmind', 'SegmindLoggerHook')
        from segmind.tracking.fluent import log_metrics
        from segmind.utils.logging_utils import try_mlflow_log
        self.log_metrics, self.mlflow_log = log_metrics, try_mlflow_log

    def log(self, runner) -> None:
        tags = self.get_loggable_tags(runner)
        if runner.rank == 0 and tags:
            self.mlflow_log(self.log_metrics, tags, step=runner.epoch, epoch=runner.epoch)
