"""minimm.mmcv: MMCV 1.x's ``mmcv.runner`` (1.7.2), beside the MMEngine-style core.

Code written against ``mmcv.runner`` runs with the import changed to ``minimm.mmcv``: this package
exports what ``mmcv/runner/__init__.py`` exports (``minimm.mmcv.parallel`` is ``mmcv.parallel``),
with MMCV's hooks, stages, priorities and runner counters. Only the lowest layer is shared with the
MMEngine side: the Registry class, Priority, checkpoint file I/O, the ops and the collectives.

Reading order, for a learner:

1. ``hooks/hook.py``: ``Hook``, its 10 stages and the generic methods they pass on to;
2. ``base_runner.py``: the runner's state, ``register_hook``/``call_hook`` and
   ``register_training_hooks`` (which config key becomes which hook, at which priority);
3. ``epoch_based_runner.py``: the loop that calls the stages (then ``iter_based_runner.py``);
4. the hooks that do the training: ``hooks/optimizer.py`` (backward and step),
   ``hooks/updater.py`` with ``hooks/lr_updater.py`` (the schedules), ``hooks/iter_timer.py``,
   ``hooks/logger/text.py`` with ``log_buffer.py``, ``hooks/checkpoint.py``;
5. the bookkeeping beside them: ``registry.py`` and ``builder.py`` (configs to objects),
   ``checkpoint.py`` (the file format), ``optimizer/``, ``fp16_utils.py``, ``parallel/``.

Left out compared with ``mmcv.runner``: ``BaseModule``/``Sequential``/``ModuleList``/``ModuleDict``,
``CheckpointLoader`` and the IPU runners.
"""
from .base_runner import BaseRunner
from .builder import RUNNER_BUILDERS, RUNNERS, build_runner
from .checkpoint import (_load_checkpoint, _load_checkpoint_with_prefix, load_checkpoint,
                         load_state_dict, save_checkpoint, weights_to_cpu)
from .default_constructor import DefaultRunnerConstructor
from .dist_utils import allreduce_grads, allreduce_params, get_dist_info, init_dist, master_only
from .epoch_based_runner import EpochBasedRunner, Runner
from .fp16_utils import LossScaler, auto_fp16, cast_tensor_type, force_fp32, wrap_fp16_model
from .hooks import (HOOKS, CheckpointHook, ClearMLLoggerHook, ClosureHook,
                    CosineAnnealingLrUpdaterHook, CosineAnnealingMomentumUpdaterHook,
                    CosineRestartLrUpdaterHook, CyclicLrUpdaterHook, CyclicMomentumUpdaterHook,
                    DistEvalHook, DistSamplerSeedHook, DvcliveLoggerHook, EMAHook, EmptyCacheHook,
                    EvalHook, ExpLrUpdaterHook, FixedLrUpdaterHook,
                    FlatCosineAnnealingLrUpdaterHook, Fp16OptimizerHook,
                    GradientCumulativeFp16OptimizerHook, GradientCumulativeOptimizerHook, Hook,
                    InvLrUpdaterHook, IterTimerHook, LinearAnnealingLrUpdaterHook,
                    LinearAnnealingMomentumUpdaterHook, LoggerHook, LrUpdaterHook, MlflowLoggerHook,
                    MomentumUpdaterHook, NeptuneLoggerHook, OneCycleLrUpdaterHook,
                    OneCycleMomentumUpdaterHook, OptimizerHook, PaviLoggerHook, PolyLrUpdaterHook,
                    ProfilerHook, SegmindLoggerHook, StepLrUpdaterHook, StepMomentumUpdaterHook,
                    SyncBuffersHook, TensorboardLoggerHook, TextLoggerHook, WandbLoggerHook)
from .iter_based_runner import IterBasedRunner, IterLoader
from .log_buffer import LogBuffer
from .optimizer import (OPTIMIZER_BUILDERS, OPTIMIZERS, DefaultOptimizerConstructor,
                        build_optimizer, build_optimizer_constructor)
from .priority import Priority, get_priority
from .registry import build_from_cfg
from .test import multi_gpu_test, single_gpu_test
from .utils import get_host_info, get_time_str, obj_from_dict, set_random_seed

__all__ = [
    # runners and building them
    'BaseRunner', 'EpochBasedRunner', 'IterBasedRunner', 'IterLoader', 'LogBuffer', 'Runner',
    'DefaultRunnerConstructor', 'RUNNERS', 'RUNNER_BUILDERS', 'build_from_cfg', 'build_runner',
    # checkpoints
    '_load_checkpoint', '_load_checkpoint_with_prefix', 'load_checkpoint', 'load_state_dict',
    'save_checkpoint', 'weights_to_cpu',
    # distributed
    'allreduce_grads', 'allreduce_params', 'get_dist_info', 'init_dist', 'master_only',
    # fp16
    'LossScaler', 'auto_fp16', 'cast_tensor_type', 'force_fp32', 'wrap_fp16_model',
    # hooks
    'HOOKS', 'Hook', 'CheckpointHook', 'ClosureHook', 'DistEvalHook', 'DistSamplerSeedHook',
    'EMAHook', 'EmptyCacheHook', 'EvalHook', 'IterTimerHook', 'ProfilerHook', 'SyncBuffersHook',
    # optimizer hooks
    'Fp16OptimizerHook', 'GradientCumulativeFp16OptimizerHook', 'GradientCumulativeOptimizerHook',
    'OptimizerHook',
    # logger hooks
    'ClearMLLoggerHook', 'DvcliveLoggerHook', 'LoggerHook', 'MlflowLoggerHook', 'NeptuneLoggerHook',
    'PaviLoggerHook', 'SegmindLoggerHook', 'TensorboardLoggerHook', 'TextLoggerHook',
    'WandbLoggerHook',
    # lr updater hooks
    'CosineAnnealingLrUpdaterHook', 'CosineRestartLrUpdaterHook', 'CyclicLrUpdaterHook',
    'ExpLrUpdaterHook', 'FixedLrUpdaterHook', 'FlatCosineAnnealingLrUpdaterHook',
    'InvLrUpdaterHook', 'LinearAnnealingLrUpdaterHook', 'LrUpdaterHook', 'OneCycleLrUpdaterHook',
    'PolyLrUpdaterHook', 'StepLrUpdaterHook',
    # momentum updater hooks
    'CosineAnnealingMomentumUpdaterHook', 'CyclicMomentumUpdaterHook',
    'LinearAnnealingMomentumUpdaterHook', 'MomentumUpdaterHook', 'OneCycleMomentumUpdaterHook',
    'StepMomentumUpdaterHook',
    # optimizers
    'DefaultOptimizerConstructor', 'OPTIMIZERS', 'OPTIMIZER_BUILDERS', 'build_optimizer',
    'build_optimizer_constructor',
    # priority, testing, utils
    'Priority', 'get_priority', 'multi_gpu_test', 'single_gpu_test', 'get_host_info',
    'get_time_str', 'obj_from_dict', 'set_random_seed',
]
