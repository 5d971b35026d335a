"""NeptuneLoggerHook, MMCV 1.x's, through minimm's ``NeptuneVisBackend``; as in MMCV, ``reset_flag``
defaults to True and ``before_run`` does not look for the last logger hook. Left out: nothing."""
from ....logging.tracking_backends import NeptuneVisBackend
from ..hook import HOOKS
from .base import ServiceLoggerHook


@HOOKS.register_module()
class NeptuneLoggerHook(ServiceLoggerHook):

    def __init__(self, init_kwargs=None, interval: int = 10, ignore_last: bool = True,
                 reset_flag: bool = True, with_step: bool = True, by_epoch: bool = True):
        super().__init__(init_kwargs, interval, ignore_last, reset_flag, by_epoch)
        self.with_step = with_step

    def before_run(self, runner) -> None:
        if runner.rank == 0:
            self.backend = NeptuneVisBackend(init_kwargs=self.init_kwargs)

    def log(self, runner) -> None:
        tags = self.get_loggable_tags(runner)
        if runner.rank != 0 or not tags:
            return
        if self.with_step:
            self.backend.add_scalars(tags, step=self.get_iter(runner))
        else:
            tags['global_step'] = self.get_iter(runner)
            for tag, value in tags.items():
                self.backend.experiment[tag].append(value)
