"""PaviLoggerHook: MMCV's logger for Pavi, SenseTime's internal service, which is not public.

The name exists so that old configs fail with a clear message instead of a missing-name error.
"""
from ..hook import HOOKS
from .base import LoggerHook


@HOOKS.register_module()
class PaviLoggerHook(LoggerHook):

    def __init__(self, *args, **kwargs):
        raise RuntimeError('PaviLoggerHook logs to Pavi, a private SenseTime service that minimm '
                           'cannot reach. Use TensorboardLoggerHook, WandbLoggerHook, '
                           'MlflowLoggerHook, NeptuneLoggerHook, DvcliveLoggerHook or '
                           'ClearMLLoggerHook instead.')
