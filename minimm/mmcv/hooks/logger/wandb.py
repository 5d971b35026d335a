"""WandbLoggerHook: MMCV 1.x's logger for Weights & Biases.

The ``wandb`` module is imported when the hook is built and kept in ``self.wandb``. Before the
run: ``wandb.init(**init_kwargs)`` and the ``define_metric_cfg`` summaries; each record:
``wandb.log`` at the global iteration counted from 1; after the run: the work dir's log files as
an artifact, then ``wandb.join()``. W&B keeps its own files where ``init_kwargs`` say (by default
``./wandb``), as in MMCV.
"""
import glob
import os.path as osp
import warnings
from typing import Dict, Optional, Union

from ...dist_utils import master_only
from ..hook import HOOKS
from .base import LoggerHook

_SUMMARIES = ['min', 'max', 'mean', 'best', 'last', 'none']


@HOOKS.register_module()
class WandbLoggerHook(LoggerHook):
    """Log to Weights & Biases.

    Args:
        init_kwargs: ``wandb.init``'s arguments.
        commit: ``wandb.log``'s ``commit`` (False: keep adding to the current step's row).
        with_step: pass the iteration as ``step``; otherwise log it as a ``global_step`` value.
        log_artifact: upload the work dir's files ending with ``out_suffix`` after the run.
        define_metric_cfg: ``{metric: summary}`` for ``wandb.define_metric``; ``summary`` is one
            of min/max/mean/best/last/none (others are warned about, and passed on anyway).
    """

    def __init__(self, init_kwargs: Optional[Dict] = None, interval: int = 10,
                 ignore_last: bool = True, reset_flag: bool = False, commit: bool = True,
                 by_epoch: bool = True, with_step: bool = True, log_artifact: bool = True,
                 out_suffix: Union[str, tuple] = ('.log.json', '.log', '.py'), define_metric_cfg:
                 Optional[Dict] = None):
        super().__init__(interval=interval, ignore_last=ignore_last, reset_flag=reset_flag,
                         by_epoch=by_epoch)
        self.import_wandb()  # fail at build time, not after the first epoch
        self.init_kwargs = init_kwargs
        self.commit, self.with_step = commit, with_step
        self.log_artifact, self.out_suffix = log_artifact, out_suffix
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
        self.wandb.init(**(self.init_kwargs or {}))
        for metric, summary in (self.define_metric_cfg or {}).items():
            if summary not in _SUMMARIES:
                warnings.warn(f'summary should be in {_SUMMARIES}. metric={metric}, '
                              f'summary={summary} will be skipped.')
            self.wandb.define_metric(metric, summary=summary)

    @master_only
    def log(self, runner) -> None:
        tags = self.get_loggable_tags(runner)
        if not tags:
            return
        step = self.get_iter(runner)
        if self.with_step:
            self.wandb.log(tags, step=step, commit=self.commit)
        else:
            self.wandb.log({**tags, 'global_step': step}, commit=self.commit)

    @master_only
    def after_run(self, runner) -> None:
        if self.log_artifact:
            artifact = self.wandb.Artifact(name='artifacts', type='model')
            for path in sorted(glob.glob(osp.join(runner.work_dir, '**', '*'), recursive=True)):
                if osp.isfile(path) and path.endswith(self.out_suffix):
                    artifact.add_file(path)
            self.wandb.log_artifact(artifact)
        self.wandb.join()
