"""The built-in hooks. Importing this package registers every one of them in ``HOOKS``.

That is the whole registration mechanism: each hook module decorates its class with
``@HOOKS.register_module()``, and the decorator runs when the module is imported here.
"""
from .checkpoint_hook import CheckpointHook
from .early_stopping_hook import EarlyStoppingHook
from .ema_hook import EMAHook
from .ema_only_checkpoint_hook import EMAOnlyCheckpointHook
from .empty_cache_hook import EmptyCacheHook
from .hook import Hook
from .iter_timer_hook import IterTimerHook
from .logger_hook import LoggerHook
from .param_scheduler_hook import ParamSchedulerHook
from .posthoc_ema_hook import PostHocEMAHook
from .profiler_hook import ProfilerHook
from .raw_weights_eval_hook import RawWeightsEvalHook
from .runtime_info_hook import RuntimeInfoHook
from .sampler_seed_hook import DistSamplerSeedHook
from .sync_buffers_hook import SyncBuffersHook
