"""DvcliveLoggerHook, MMCV 1.x's, through minimm's ``DVCLiveVisBackend`` (``**kwargs`` go to
``dvclive.Live``; ``model_file``: a checkpoint after each train epoch). Left out: nothing."""
import os.path as osp

from ....logging.tracking_backends import DVCLiveVisBackend
from ..hook import HOOKS
from .base import BackendLoggerHook


@HOOKS.register_module()
class DvcliveLoggerHook(BackendLoggerHook):

    def __init__(self, model_file=None, interval: int = 10, ignore_last: bool = True,
                 reset_flag: bool = False, by_epoch: bool = True, dvclive=None, **kwargs):
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        self.model_file, self.dvclive, self.kwargs = model_file, dvclive, kwargs

    def make_backend(self, runner):
        backend = DVCLiveVisBackend(osp.join(runner.work_dir, 'dvclive'), self.kwargs)
        if self.dvclive is not None:  # a Live object of the caller's: the backend writes to it
            backend._experiment, backend._env_initialized = self.dvclive, True
        return backend

    def get_step(self, runner) -> int:
        return self.get_epoch(runner) if self.by_epoch else self.get_iter(runner)

    def after_train_epoch(self, runner) -> None:
        if self.model_file is not None:
            runner.save_checkpoint(osp.dirname(self.model_file) or '.',
                                   filename_tmpl=osp.basename(self.model_file),
                                   create_symlink=False)
        if self.by_epoch:
            super().after_train_epoch(runner)

    def after_train_iter(self, runner) -> None:
        if not self.by_epoch:
            super().after_train_iter(runner)
