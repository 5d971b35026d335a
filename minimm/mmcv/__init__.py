"""minimm.mmcv: MMCV 1.x's ``mmcv.runner``, for contrast with the MMEngine-style core.

Code written against ``mmcv.runner`` (v1.7) runs with the import changed to ``minimm.mmcv``.
The hooks, stages, priorities and runner counters follow MMCV 1.7.2; everything that is not
MMCV-specific (Registry, Priority, checkpoint files, ops, collectives) is minimm's shared code.
"""
from minimm.dist import get_dist_info, init_dist, master_only
from minimm.runner.priority import Priority, get_priority

from .base_runner import BaseRunner
from .builder import RUNNERS, build_from_cfg, build_runner
from .checkpoint import load_checkpoint, save_checkpoint
from .epoch_based_runner import EpochBasedRunner, Runner
from .fp16_utils import LossScaler, auto_fp16, cast_tensor_type, force_fp32, wrap_fp16_model
from .hooks import (HOOKS, CheckpointHook, ClosureHook, DistEvalHook, DistSamplerSeedHook, EMAHook,
                    EmptyCacheHook, EvalHook, Fp16OptimizerHook, GradientCumulativeFp16OptimizerHook,
                    GradientCumulativeOptimizerHook, Hook, IterTimerHook, OptimizerHook, ProfilerHook,
                    SyncBuffersHook)
from .hooks import (ClearMLLoggerHook, CosineAnnealingLrUpdaterHook,
                    CosineAnnealingMomentumUpdaterHook, CosineRestartLrUpdaterHook,
                    CyclicLrUpdaterHook, CyclicMomentumUpdaterHook, DvcliveLoggerHook,
                    ExpLrUpdaterHook, FixedLrUpdaterHook, FlatCosineAnnealingLrUpdaterHook,
                    InvLrUpdaterHook, LinearAnnealingLrUpdaterHook,
                    LinearAnnealingMomentumUpdaterHook, LoggerHook, LrUpdaterHook,
                    MlflowLoggerHook, MomentumUpdaterHook, NeptuneLoggerHook,
                    OneCycleLrUpdaterHook, OneCycleMomentumUpdaterHook, PaviLoggerHook,
                    PolyLrUpdaterHook, SegmindLoggerHook, StepLrUpdaterHook,
                    StepMomentumUpdaterHook, TensorboardLoggerHook, TextLoggerHook,
                    WandbLoggerHook)
from .iter_based_runner import IterBasedRunner, IterLoader
from .log_buffer import LogBuffer
from .optimizer import (OPTIMIZER_BUILDERS, OPTIMIZERS, DefaultOptimizerConstructor,
                        build_optimizer, build_optimizer_constructor)
from .test import multi_gpu_test, single_gpu_test

__all__ = [
    'Priority', 'get_priority', 'get_dist_info', 'init_dist', 'master_only', 'BaseRunner', 'RUNNERS',
    'build_from_cfg', 'build_runner', 'load_checkpoint', 'save_checkpoint', 'EpochBasedRunner',
    'Runner', 'auto_fp16', 'wrap_fp16_model', 'HOOKS', 'Hook', 'CheckpointHook', 'ClosureHook',
    'DistEvalHook', 'DistSamplerSeedHook', 'EMAHook', 'EmptyCacheHook', 'EvalHook',
    'Fp16OptimizerHook', 'GradientCumulativeFp16OptimizerHook', 'GradientCumulativeOptimizerHook',
    'IterTimerHook', 'OptimizerHook', 'ProfilerHook', 'SyncBuffersHook', 'IterBasedRunner',
    'IterLoader', 'LogBuffer', 'multi_gpu_test', 'single_gpu_test'
]
__all__ += [
    'LrUpdaterHook', 'FixedLrUpdaterHook', 'StepLrUpdaterHook', 'ExpLrUpdaterHook',
    'PolyLrUpdaterHook', 'InvLrUpdaterHook', 'CosineAnnealingLrUpdaterHook',
    'FlatCosineAnnealingLrUpdaterHook', 'CosineRestartLrUpdaterHook', 'CyclicLrUpdaterHook',
    'OneCycleLrUpdaterHook', 'LinearAnnealingLrUpdaterHook', 'MomentumUpdaterHook',
    'StepMomentumUpdaterHook', 'CosineAnnealingMomentumUpdaterHook', 'CyclicMomentumUpdaterHook',
    'OneCycleMomentumUpdaterHook', 'LinearAnnealingMomentumUpdaterHook', 'LoggerHook',
    'TextLoggerHook', 'TensorboardLoggerHook', 'WandbLoggerHook', 'MlflowLoggerHook',
    'NeptuneLoggerHook', 'DvcliveLoggerHook', 'ClearMLLoggerHook', 'SegmindLoggerHook',
    'PaviLoggerHook'
]
__all__ += [
    'OPTIMIZER_BUILDERS', 'OPTIMIZERS', 'DefaultOptimizerConstructor', 'build_optimizer',
    'build_optimizer_constructor', 'force_fp32', 'LossScaler', 'cast_tensor_type'
]
