"""Registries: ``Registry``, the build functions and the root registries (MMEngine's
``mmengine.registry``; see ``registry.py`` first)."""
from .registry import CUSTOM_IMPORT_HINT, Registry, import_object
from .build_functions import build_from_cfg, build_runner_from_cfg
from .root import (DATA_SAMPLERS, DATASETS, EVALUATOR, FUNCTIONS, HOOKS, LOG_PROCESSORS, LOOPS,
                   METRICS, MODEL_WRAPPERS, MODELS, OPTIM_WRAPPER_CONSTRUCTORS, OPTIM_WRAPPERS,
                   OPTIMIZERS, PARAM_SCHEDULERS, RUNNERS, VISBACKENDS, VISUALIZERS)

__all__ = [
    'Registry', 'build_from_cfg', 'build_runner_from_cfg', 'import_object', 'CUSTOM_IMPORT_HINT',
    'RUNNERS', 'HOOKS', 'DATASETS', 'DATA_SAMPLERS', 'MODELS', 'MODEL_WRAPPERS', 'OPTIMIZERS',
    'OPTIM_WRAPPERS', 'OPTIM_WRAPPER_CONSTRUCTORS', 'PARAM_SCHEDULERS', 'METRICS', 'EVALUATOR',
    'LOOPS', 'VISUALIZERS', 'VISBACKENDS', 'LOG_PROCESSORS', 'FUNCTIONS'
]
