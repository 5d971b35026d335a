"""ClearMLLoggerHook, MMCV 1.7's, through minimm's ``ClearMLVisBackend`` (each tag its own title and
series). Left out: nothing."""
from ....logging.tracking_backends import ClearMLVisBackend
from ..hook import HOOKS
from .base import ServiceLoggerHook


@HOOKS.register_module()
class ClearMLLoggerHook(ServiceLoggerHook):

    def make_backend(self, runner):
        return ClearMLVisBackend(init_kwargs=self.init_kwargs)
