"""PaviLoggerHook: Pavi is SenseTime's private service; the name exists so that old configs fail
with a clear message. Left out: the logging itself."""
from ..hook import HOOKS
from .base import LoggerHook


@HOOKS.register_module()
class PaviLoggerHook(LoggerHook):

    def __init__(self, *args, **kwargs):
        raise RuntimeError('PaviLoggerHook logs to Pavi, a private SenseTime service that minimm '
                           'cannot reach. Use TensorboardLoggerHook, WandbLoggerHook, '
                           'MlflowLoggerHook, NeptuneLoggerHook, DvcliveLoggerHook or '
                           'ClearMLLoggerHook instead.')
