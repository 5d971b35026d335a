"""WandbLoggerHook, MMCV 1.x's: the ``wandb`` module in ``self.wandb`` (imported when the hook is
built), ``wandb.init(**init_kwargs)`` before the run, ``wandb.log`` at ``iter + 1``, and after
the run the work dir's log files as an artifact, then ``wandb.join()``. As in MMCV, W&B writes
its own files where ``init_kwargs`` say (by default ``./wandb``). Left out: nothing."""
import glob
import os.path as osp
import warnings
from typing import Dict, Optional, Union

from ...dist_utils import master_only

from ..hook import HOOKS
from .base import LoggerHook


@HOOKS.register_module()
class WandbLoggerHook(LoggerHook):
    """Log to Weights & Biases.

    Args:
        init_kwargs: the arguments of ``wandb.init``.
        commit: ``wandb.log``'s ``commit`` (False: only update the current row).
        with_step: pass ``step=iter + 1``; otherwise log it as ``global_step``.
        log_artifact: upload the work dir's files ending with ``out_suffix`` after the run.
        define_metric_cfg: ``{metric: summary}`` for ``wandb.define_metric`` (``summary`` one of
            min/max/mean/best/last/none).
    """

    def __init__(self, init_kwargs: Optional[Dict] = None, interval: int = 10,
                 ignore_last: bool = True, reset_flag: bool = False, commit: bool = True,
                 by_epoch: bool = True, with_step: bool = True, log_artifact: bool = True,
                 out_suffix: Union[str, tuple] = ('.log.json', '.log', '.py'),
                 define_metric_cfg: Optional[Dict] = None):
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        self.import_wandb()
        self.init_kwargs = init_kwargs
        self.commit = commit
        self.with_step = with_step
        self.log_artifact = log_artifact
        self.out_suffix = out_suffix
        self.define_metric_cfg = define_metric_cfg

    def import_wandb(self) -> None:
        try:
            import wandb
        except ImportError:
            raise ImportError('Please run "pip install wandb" to install wandb')
        self.wandb = wandb

    @master_only
    def before_run(self, runner) -> None:
        super().before_run(runner)
        if self.wandb is None:
            self.import_wandb()
        if self.init_kwargs:
            self.wandb.init(**self.init_kwargs)
        else:
            self.wandb.init()
        summary_choice = ['min', 'max', 'mean', 'best', 'last', 'none']
        if self.define_metric_cfg is not None:
            for metric, summary in self.define_metric_cfg.items():
                if summary not in summary_choice:
                    warnings.warn(f'summary should be in {summary_choice}. metric={metric}, '
                                  f'summary={summary} will be skipped.')
                self.wandb.define_metric(metric, summary=summary)

    @master_only
    def log(self, runner) -> None:
        tags = self.get_loggable_tags(runner)
        if tags:
            if self.with_step:
                self.wandb.log(tags, step=self.get_iter(runner), commit=self.commit)
            else:
                tags['global_step'] = self.get_iter(runner)
                self.wandb.log(tags, commit=self.commit)

    @master_only
    def after_run(self, runner) -> None:
        if self.log_artifact:
            wandb_artifact = self.wandb.Artifact(name='artifacts', type='model')
            pattern = osp.join(runner.work_dir, '**', '*')
            for local_filepath in sorted(glob.glob(pattern, recursive=True)):
                if osp.isfile(local_filepath) and local_filepath.endswith(self.out_suffix):
                    wandb_artifact.add_file(local_filepath)
            self.wandb.log_artifact(wandb_artifact)
        self.wandb.join()
