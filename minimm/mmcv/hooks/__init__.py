"""MMCV 1.x's hooks. Importing this package registers each of them in ``minimm.mmcv.HOOKS``.

As in ``mmcv/runner/hooks/__init__.py``, the import lines below *are* the registration: each
module decorates its classes with ``@HOOKS.register_module()``, which runs on import.
``EvalHook`` and ``DistEvalHook`` are imported but, as in MMCV, not registered.
"""
from .hook import HOOKS, Hook
from .checkpoint import CheckpointHook
from .closure import ClosureHook
from .ema import EMAHook
from .evaluation import DistEvalHook, EvalHook
from .iter_timer import IterTimerHook
from .logger import (ClearMLLoggerHook, DvcliveLoggerHook, LoggerHook, MlflowLoggerHook,
                     NeptuneLoggerHook, PaviLoggerHook, SegmindLoggerHook, TensorboardLoggerHook,
                     TextLoggerHook, WandbLoggerHook)
from .lr_updater import (CosineAnnealingLrUpdaterHook, CosineRestartLrUpdaterHook,
                         CyclicLrUpdaterHook, ExpLrUpdaterHook, FixedLrUpdaterHook,
                         FlatCosineAnnealingLrUpdaterHook, InvLrUpdaterHook,
                         LinearAnnealingLrUpdaterHook, LrUpdaterHook, OneCycleLrUpdaterHook,
                         PolyLrUpdaterHook, StepLrUpdaterHook)
from .memory import EmptyCacheHook
from .momentum_updater import (CosineAnnealingMomentumUpdaterHook, CyclicMomentumUpdaterHook,
                               LinearAnnealingMomentumUpdaterHook, MomentumUpdaterHook,
                               OneCycleMomentumUpdaterHook, StepMomentumUpdaterHook)
from .optimizer import (Fp16OptimizerHook, GradientCumulativeFp16OptimizerHook,
                        GradientCumulativeOptimizerHook, OptimizerHook)
from .profiler import ProfilerHook
from .sampler_seed import DistSamplerSeedHook
from .sync_buffer import SyncBuffersHook
