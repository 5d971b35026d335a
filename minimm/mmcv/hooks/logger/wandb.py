"""WandbLoggerHook, MMCV 1.x's, through minimm's ``WandbVisBackend``; after the run it uploads the
log files as an artifact. Different from MMCV: W&B files go to the work dir, not the cwd."""
import os
import os.path as osp
import warnings

from ....logging.tracking_backends import WandbVisBackend
from ..hook import HOOKS
from .base import ServiceLoggerHook


@HOOKS.register_module()
class WandbLoggerHook(ServiceLoggerHook):

    def __init__(self, init_kwargs=None, interval: int = 10, ignore_last: bool = True,
                 reset_flag: bool = False, commit: bool = True, by_epoch: bool = True,
                 with_step: bool = True, log_artifact: bool = True,
                 out_suffix=('.log.json', '.log', '.py'), define_metric_cfg=None):
        super().__init__(init_kwargs, interval, ignore_last, reset_flag, by_epoch)
        self.commit, self.with_step = commit, with_step
        self.log_artifact, self.out_suffix = log_artifact, out_suffix
        for metric, summary in (define_metric_cfg or {}).items():
            if summary not in ('min', 'max', 'mean', 'best', 'last', 'none'):
                warnings.warn(f'summary should be in min/max/mean/best/last/none, not {summary}')
        self.define_metric_cfg = define_metric_cfg

    def make_backend(self, runner):
        return WandbVisBackend(runner.work_dir, self.init_kwargs, self.define_metric_cfg,
                               self.commit)

    def log(self, runner) -> None:
        tags = self.get_loggable_tags(runner)
        if runner.rank != 0 or not tags:
            return
        if self.with_step:
            self.backend.experiment.log(tags, step=self.get_iter(runner), commit=self.commit)
        else:
            tags['global_step'] = self.get_iter(runner)
            self.backend.add_scalars(tags)

    def after_run(self, runner) -> None:
        if runner.rank == 0 and self.log_artifact:
            wandb = self.backend.experiment
            artifact = wandb.Artifact(name='artifacts', type='model')
            for root, _, files in os.walk(runner.work_dir):
                for name in files:
                    if name.endswith(self.out_suffix) and not root.startswith(
                            osp.join(runner.work_dir, 'wandb')):
                        artifact.add_file(osp.join(root, name))
            wandb.log_artifact(artifact)
        super().after_run(runner)
