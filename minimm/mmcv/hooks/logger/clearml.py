"""ClearMLLoggerHook, MMCV 1.7's, through minimm's ``ClearMLVisBackend`` (each tag its own title and
series). Left out: nothing."""
from ....logging.tracking_backends import ClearMLVisBackend
from ..hook import HOOKS
from .base import BackendLoggerHook


@HOOKS.register_module()
class ClearMLLoggerHook(BackendLoggerHook):

    def __init__(self, init_kwargs=None, interval: int = 10, ignore_last: bool = True,
                 reset_flag: bool = False, by_epoch: bool = True):
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        self.init_kwargs = init_kwargs

    def make_backend(self, runner):
        return ClearMLVisBackend(init_kwargs=self.init_kwargs)
