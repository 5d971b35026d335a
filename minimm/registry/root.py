"""The root registries, named as MMEngine's ``mmengine/registry/root.py``.

Each holds one kind of object the Runner builds from a config; a class joins one with
``@REGISTRY.register_module()`` when its module is imported (see ``registry.py``).
"""
import inspect

from .build_functions import build_runner_from_cfg
from .registry import Registry

__all__ = [
    'RUNNERS', 'HOOKS', 'DATASETS', 'DATA_SAMPLERS', 'MODELS', 'MODEL_WRAPPERS', 'OPTIMIZERS',
    'OPTIM_WRAPPERS', 'OPTIM_WRAPPER_CONSTRUCTORS', 'PARAM_SCHEDULERS', 'METRICS', 'EVALUATOR',
    'LOOPS', 'VISUALIZERS', 'VISBACKENDS', 'LOG_PROCESSORS', 'FUNCTIONS'
]

# Runners (``runner_type`` in a config): built through their ``from_cfg``.
RUNNERS = Registry('runner', build_func=build_runner_from_cfg)
HOOKS = Registry('hook')
DATASETS = Registry('dataset')
DATA_SAMPLERS = Registry('data sampler')
MODELS = Registry('model')
# Wrappers such as MMDistributedDataParallel (``model_wrapper_cfg``).
MODEL_WRAPPERS = Registry('model_wrapper')
OPTIMIZERS = Registry('optimizer')
OPTIM_WRAPPERS = Registry('optim wrapper')
# What builds an optim wrapper from ``optim_wrapper`` (its ``constructor`` key).
OPTIM_WRAPPER_CONSTRUCTORS = Registry('optimizer wrapper constructor')
PARAM_SCHEDULERS = Registry('parameter scheduler')
METRICS = Registry('metric')
# Evaluators (``val_evaluator=dict(type=..., metrics=[...])``); metrics are in METRICS.
EVALUATOR = Registry('evaluator')
LOOPS = Registry('loop')
VISUALIZERS = Registry('visualizer')
VISBACKENDS = Registry('vis_backend')
LOG_PROCESSORS = Registry('log_processor')
FUNCTIONS = Registry('function')


def _register_torch_optimizers() -> None:
    """Pre-fill OPTIMIZERS with every optimizer class in ``torch.optim`` (as MMEngine does)."""
    import torch

    for name in dir(torch.optim):
        obj = getattr(torch.optim, name)
        if inspect.isclass(obj) and issubclass(obj, torch.optim.Optimizer) \
                and obj is not torch.optim.Optimizer:
            OPTIMIZERS.register_module(name=name, module=obj)


_register_torch_optimizers()
