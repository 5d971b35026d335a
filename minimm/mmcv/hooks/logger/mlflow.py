"""MlflowLoggerHook, MMCV 1.x's: ``mlflow`` and ``mlflow.pytorch`` in ``self.mlflow`` and
``self.mlflow_pytorch`` (imported when the hook is built); metrics at ``iter + 1`` into the active
run (MLflow's own tracking URI: ``MLFLOW_TRACKING_URI``, else ``./mlruns``), the model logged
after the run. Different from MMCV 1.7: on MLflow 3, whose default format needs an input example,
the model is still pickled (``serialization_format='pickle'``)."""
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
        exp_name: the experiment to set active (created if it does not exist).
        tags: tags of the current run.
        params: params of the current run.
        log_model: log ``runner.model`` as an MLflow artifact after the run.
    """

    def __init__(self, exp_name: Optional[str] = None, tags: Optional[Dict] = None,
                 params: Optional[Dict] = None, log_model: bool = True, interval: int = 10,
                 ignore_last: bool = True, reset_flag: bool = False, by_epoch: bool = True):
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        self.import_mlflow()
        self.exp_name = exp_name
        self.tags = tags
        self.params = params
        self.log_model = log_model

    def import_mlflow(self) -> None:
        try:
            import mlflow
            import mlflow.pytorch as mlflow_pytorch
        except ImportError:
            raise ImportError('Please run "pip install mlflow" to install mlflow')
        self.mlflow = mlflow
        self.mlflow_pytorch = mlflow_pytorch

    @master_only
    def before_run(self, runner) -> None:
        super().before_run(runner)
        if self.exp_name is not None:
            self.mlflow.set_experiment(self.exp_name)
        if self.tags is not None:
            self.mlflow.set_tags(self.tags)
        if self.params is not None:
            self.mlflow.log_params(self.params)

    @master_only
    def log(self, runner) -> None:
        tags = self.get_loggable_tags(runner)
        if tags:
            self.mlflow.log_metrics(tags, step=self.get_iter(runner))

    @master_only
    def after_run(self, runner) -> None:
        if self.log_model:
            log_model = self.mlflow_pytorch.log_model
            kwargs = {'serialization_format': 'pickle'} if 'serialization_format' in \
                inspect.signature(log_model).parameters else {}
            log_model(runner.model, 'models', pip_requirements=[f'torch=={torch.__version__}'],
                      **kwargs)
