"""MMCV 1.x's hooks. Importing this package registers each of them in ``minimm.mmcv.HOOKS``.

As in ``mmcv/runner/hooks/__init__.py``, the import lines below *are* the registration: each
module decorates its classes with ``@HOOKS.register_module()``, which runs on import.
"""
from .hook import HOOKS, Hook
from .lr_updater import (CosineAnnealingLrUpdaterHook, CosineRestartLrUpdaterHook,
                         CyclicLrUpdaterHook, ExpLrUpdaterHook, FixedLrUpdaterHook,
                         FlatCosineAnnealingLrUpdaterHook, InvLrUpdaterHook,
                         LinearAnnealingLrUpdaterHook, LrUpdaterHook, OneCycleLrUpdaterHook,
                         PolyLrUpdaterHook, StepLrUpdaterHook)
from .momentum_updater import (CosineAnnealingMomentumUpdaterHook, CyclicMomentumUpdaterHook,
                               LinearAnnealingMomentumUpdaterHook, MomentumUpdaterHook,
                               OneCycleMomentumUpdaterHook, StepMomentumUpdaterHook)
from .logger import (ClearMLLoggerHook, DvcliveLoggerHook, LoggerHook, MlflowLoggerHook,
                     NeptuneLoggerHook, PaviLoggerHook, SegmindLoggerHook, TensorboardLoggerHook,
                     TextLoggerHook, WandbLoggerHook)
