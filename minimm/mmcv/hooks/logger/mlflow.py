"""MlflowLoggerHook: MMCV 1.x's logger for MLflow.

``mlflow`` and ``mlflow.pytorch`` are imported when the hook is built, into ``self.mlflow`` and
``self.mlflow_pytorch``. Metrics go to the active run at the global iteration counted from 1;
where runs are stored is MLflow's own setting (``MLFLOW_TRACKING_URI``, else ``./mlruns``). After
the run the model itself can be logged. Different from MMCV 1.7: on MLflow 3, whose default model
format needs an input example, the model is still pickled (``serialization_format='pickle'``).
"""
import inspect
from typing import Dict, Optional

import torch

from ...dist_utils import master_only
from ..hook import HOOKS
from .base import LoggerHook


@HOOKS.register_module()
class MlflowLoggerHook(LoggerHook):
    """Log metrics and (``log_model``) the trained model to MLflow.

    Args:
        exp_name: the experiment to make active (MLflow creates it if needed).
        tags, params: set on the run before training.
        log_model: log ``runner.model`` as an artifact named ``models`` after the run.
    """

    def __init__(self, exp_name: Optional[str] = None, tags: Optional[Dict] = None,
                 params: Optional[Dict] = None, log_model: bool = True, interval: int = 10,
                 ignore_last: bool = True, reset_flag: bool = False, by_epoch: bool = True):
        super().__init__(interval=interval, ignore_last=ignore_last, reset_flag=reset_flag,
                         by_epoch=by_epoch)
        self.import_mlflow()
        self.exp_name, self.tags, self.params = exp_name, tags, params
        self.log_model = log_model

    def import_mlflow(self) -> None:
        try:
            import mlflow
            import mlflow.pytorch as mlflow_pytorch
        except ImportError:
            raise ImportError('Please run "pip install mlflow" to install mlflow')
        self.mlflow, self.mlflow_pytorch = mlflow, mlflow_pytorch

    @master_only
    def before_run(self, runner) -> None:
        super().before_run(runner)
        # each setting only when given; the experiment first, since the run lives in it
        for apply, value in ((self.mlflow.set_experiment, self.exp_name),
                             (self.mlflow.set_tags, self.tags),
                             (self.mlflow.log_params, self.params)):
            if value is not None:
                apply(value)

    @master_only
    def log(self, runner) -> None:
        metrics = self.get_loggable_tags(runner)
        if metrics:
            self.mlflow.log_metrics(metrics, step=self.get_iter(runner))

    @master_only
    def after_run(self, runner) -> None:
        if not self.log_model:
            return
        save = self.mlflow_pytorch.log_model
        extra = {}
        if 'serialization_format' in inspect.signature(save).parameters:
            extra['serialization_format'] = 'pickle'
        save(runner.model, 'models', pip_requirements=[f'torch=={torch.__version__}'], **extra)
