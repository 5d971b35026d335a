"""MlflowLoggerHook, MMCV 1.x's, through minimm's ``MLflowVisBackend``. Different from MMCV: without
``MLFLOW_TRACKING_URI`` the file store is ``work_dir/mlruns``, not the current folder."""
import inspect
import os
import os.path as osp

import torch

from ....logging.tracking_backends import MLflowVisBackend
from ..hook import HOOKS
from .base import BackendLoggerHook


@HOOKS.register_module()
class MlflowLoggerHook(BackendLoggerHook):

    def __init__(self, exp_name=None, tags=None, params=None, log_model: bool = True,
                 interval: int = 10, ignore_last: bool = True, reset_flag: bool = False,
                 by_epoch: bool = True):
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        self.exp_name, self.tags, self.params, self.log_model = exp_name, tags, params, log_model

    def make_backend(self, runner):
        return MLflowVisBackend(osp.join(runner.work_dir, 'mlruns'), self.exp_name,
                                tags=self.tags, params=self.params,
                                tracking_uri=os.environ.get('MLFLOW_TRACKING_URI'))

    def after_run(self, runner) -> None:
        if runner.rank == 0 and self.log_model:
            log_model = self.backend.experiment.pytorch.log_model
            # MLflow 3 defaults to a traced format that needs an input example: keep pickling.
            kwargs = {'serialization_format': 'pickle'} if 'serialization_format' in \
                inspect.signature(log_model).parameters else {}
            log_model(runner.model, 'models', pip_requirements=[f'torch=={torch.__version__}'],
                      **kwargs)
        super().after_run(runner)
