"""DvcliveLoggerHook, MMCV 1.x's: a ``dvclive.Live`` in ``self.dvclive`` (the caller's, or one
built from ``**kwargs`` when the hook is built), stepped by epoch (``by_epoch``) or by
``iter + 1``; ``model_file``: a checkpoint written there after each train epoch. Left out:
nothing."""
from pathlib import Path
from typing import Optional

from ...dist_utils import master_only

from ..hook import HOOKS
from .base import LoggerHook


@HOOKS.register_module()
class DvcliveLoggerHook(LoggerHook):
    """Log with DVCLive. ``by_epoch`` also chooses when ``log`` runs: after each train epoch
    (True) or every ``interval`` iterations (False); val epochs log either way."""

    def __init__(self, model_file: Optional[str] = None, interval: int = 10,
                 ignore_last: bool = True, reset_flag: bool = False, by_epoch: bool = True,
                 dvclive=None, **kwargs):
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        self.model_file = model_file
        self._import_dvclive(dvclive, **kwargs)

    def _import_dvclive(self, dvclive=None, **kwargs) -> None:
        try:
            from dvclive import Live
        except ImportError:
            raise ImportError('Please run "pip install dvclive" to install dvclive')
        self.dvclive = dvclive if dvclive is not None else Live(**kwargs)

    @master_only
    def log(self, runner) -> None:
        tags = self.get_loggable_tags(runner)
        if tags:
            step = self.get_epoch(runner) if self.by_epoch else self.get_iter(runner)
            self.dvclive.set_step(step)

            for k, v in tags.items():
                self.dvclive.log(k, v)

    def after_train_epoch(self, runner) -> None:
        if self.model_file is not None:
            runner.save_checkpoint(Path(self.model_file).parent,
                                   filename_tmpl=Path(self.model_file).name,
                                   create_symlink=False)
        if self.by_epoch:
            super().after_train_epoch(runner)

    def after_train_iter(self, runner) -> None:
        if not self.by_epoch:
            super().after_train_iter(runner)
