"""SegmindLoggerHook: MMCV 1.7's logger for Segmind.

Segmind's tracking is MLflow-style: the hook keeps its ``log_metrics`` in ``self.log_metrics``
and the wrapper that calls it, ``try_mlflow_log``, in ``self.mlflow_log`` (both found when the
hook is built). The step is ``runner.epoch``.
"""
from ...dist_utils import master_only
from ..hook import HOOKS
from .base import LoggerHook


@HOOKS.register_module()
class SegmindLoggerHook(LoggerHook):
    """Log to Segmind."""

    def __init__(self, interval: int = 10, ignore_last: bool = True, reset_flag: bool = False,
                 by_epoch=True):
        super().__init__(interval=interval, ignore_last=ignore_last, reset_flag=reset_flag,
                         by_epoch=by_epoch)
        self.import_segmind()

    def import_segmind(self) -> None:
        try:
            import segmind
        except ImportError:
            raise ImportError("Please run 'pip install segmind' to install segmind")
        self.log_metrics = segmind.tracking.fluent.log_metrics
        self.mlflow_log = segmind.utils.logging_utils.try_mlflow_log

    @master_only
    def log(self, runner) -> None:
        metrics = self.get_loggable_tags(runner)
        if metrics:
            epoch = runner.epoch
            self.mlflow_log(self.log_metrics, metrics, step=epoch, epoch=epoch)
