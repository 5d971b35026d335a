"""DvcliveLoggerHook: MMCV 1.x's logger for DVCLive.

``self.dvclive`` is a ``dvclive.Live``: the caller's own (``dvclive=``), or one the hook builds
from ``**kwargs`` when it is built. The step is the epoch (``by_epoch``) or the global iteration
counted from 1. ``model_file``: a checkpoint written there after each train epoch.
"""
from pathlib import Path
from typing import Optional

from ...dist_utils import master_only
from ..hook import HOOKS
from .base import LoggerHook


@HOOKS.register_module()
class DvcliveLoggerHook(LoggerHook):
    """Log with DVCLive. ``by_epoch`` also says when train records are written: after each
    train epoch (True) or every ``interval`` iterations (False); val epochs are logged either
    way."""

    def __init__(self, model_file: Optional[str] = None, interval: int = 10,
                 ignore_last: bool = True, reset_flag: bool = False, by_epoch: bool = True,
                 dvclive=None, **kwargs):
        super().__init__(interval=interval, ignore_last=ignore_last, reset_flag=reset_flag,
                         by_epoch=by_epoch)
        self.model_file = model_file
        self._import_dvclive(dvclive, **kwargs)

    def _import_dvclive(self, dvclive=None, **kwargs) -> None:
        try:
            from dvclive import Live
        except ImportError:
            raise ImportError('Please run "pip install dvclive" to install dvclive')
        self.dvclive = Live(**kwargs) if dvclive is None else dvclive

    @master_only
    def log(self, runner) -> None:
        tags = self.get_loggable_tags(runner)
        if not tags:
            return
        self.dvclive.set_step(self.get_epoch(runner) if self.by_epoch else self.get_iter(runner))
        for name, value in tags.items():
            self.dvclive.log(name, value)

    def after_train_epoch(self, runner) -> None:
        if self.model_file is not None:
            target = Path(self.model_file)
            runner.save_checkpoint(target.parent, filename_tmpl=target.name,
                                   create_symlink=False)
        if self.by_epoch:
            super().after_train_epoch(runner)

    def after_train_iter(self, runner) -> None:
        if not self.by_epoch:  # by epoch, train records wait for the end of the epoch
            super().after_train_iter(runner)
