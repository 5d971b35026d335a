"""Registries: ``Registry``, the build functions, the root registries, the default scope and
two tree utilities (MMEngine's ``mmengine.registry``; see ``registry.py`` first)."""
from ..utils.misc import import_object
from .build_functions import (build_from_cfg, build_model_from_cfg, build_runner_from_cfg,
                              build_scheduler_from_cfg)
from .default_scope import DefaultScope, init_default_scope
from .lookup import CUSTOM_IMPORT_HINT
from .registry import Registry
from .root import (DATA_SAMPLERS, DATASETS, EVALUATOR, FUNCTIONS, HOOKS, INFERENCERS,
                   LOG_PROCESSORS, LOOPS, METRICS, MODEL_WRAPPERS, MODELS,
                   OPTIM_WRAPPER_CONSTRUCTORS, OPTIM_WRAPPERS, OPTIMIZERS, PARAM_SCHEDULERS,
                   RUNNER_CONSTRUCTORS, RUNNERS, STRATEGIES, TASK_UTILS, TRANSFORMS, VISBACKENDS,
                   VISUALIZERS, WEIGHT_INITIALIZERS)
from .utils import count_registered_modules, traverse_registry_tree

__all__ = [
    'Registry', 'build_from_cfg', 'build_model_from_cfg', 'build_runner_from_cfg',
    'build_scheduler_from_cfg', 'import_object', 'CUSTOM_IMPORT_HINT', 'DefaultScope',
    'init_default_scope', 'count_registered_modules', 'traverse_registry_tree',
    'RUNNERS', 'RUNNER_CONSTRUCTORS', 'LOOPS', 'HOOKS', 'STRATEGIES', 'DATASETS', 'DATA_SAMPLERS',
    'TRANSFORMS', 'MODELS', 'MODEL_WRAPPERS', 'WEIGHT_INITIALIZERS', 'OPTIMIZERS',
    'OPTIM_WRAPPERS', 'OPTIM_WRAPPER_CONSTRUCTORS', 'PARAM_SCHEDULERS', 'METRICS', 'EVALUATOR',
    'TASK_UTILS', 'VISUALIZERS', 'VISBACKENDS', 'LOG_PROCESSORS', 'INFERENCERS', 'FUNCTIONS'
]
