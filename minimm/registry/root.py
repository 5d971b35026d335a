"""The root registries, named as MMEngine's ``mmengine/registry/root.py``.

Each holds one kind of object the Runner builds from a config; a class joins one with
``@REGISTRY.register_module()`` when its module is imported (see ``registry.py``). Their scope is
``'mmengine'`` (the library minimm stands for), and each names in ``locations`` the minimm
package that fills it, so ``PARAM_SCHEDULERS.get('StepLR')`` works before anyone imported
``minimm.optim``. A downstream package's ``registry.py`` makes children of these.

``TRANSFORMS``, ``WEIGHT_INITIALIZERS``, ``TASK_UTILS`` and ``INFERENCERS`` stay empty in
minimm (it has no transforms, initialisers, task utilities or inferencers): they exist so that a
downstream ``registry.py`` that imports all twenty-three works unchanged.
"""
import inspect

from .build_functions import build_model_from_cfg, build_runner_from_cfg, build_scheduler_from_cfg
from .registry import Registry

__all__ = [
    'RUNNERS', 'RUNNER_CONSTRUCTORS', 'LOOPS', 'HOOKS', 'STRATEGIES', 'DATASETS', 'DATA_SAMPLERS',
    'TRANSFORMS', 'MODELS', 'MODEL_WRAPPERS', 'WEIGHT_INITIALIZERS', 'OPTIMIZERS',
    'OPTIM_WRAPPERS', 'OPTIM_WRAPPER_CONSTRUCTORS', 'PARAM_SCHEDULERS', 'METRICS', 'EVALUATOR',
    'TASK_UTILS', 'VISUALIZERS', 'VISBACKENDS', 'LOG_PROCESSORS', 'INFERENCERS', 'FUNCTIONS'
]

# Runners (``runner_type`` in a config): built through their ``from_cfg``.
RUNNERS = Registry('runner', build_func=build_runner_from_cfg, locations=['minimm.runner'])
# What builds a runner from a config, for runners that are not built by ``from_cfg``.
RUNNER_CONSTRUCTORS = Registry('runner constructor', locations=['minimm.runner'])
LOOPS = Registry('loop', locations=['minimm.runner'])
HOOKS = Registry('hook', locations=['minimm.hooks'])
# How a FlexibleRunner spreads the model over the processes (``strategy``).
STRATEGIES = Registry('strategy', locations=['minimm.runner'])
DATASETS = Registry('dataset', locations=['minimm.dataset'])
DATA_SAMPLERS = Registry('data sampler', locations=['minimm.dataset'])
TRANSFORMS = Registry('transform')
# A list of model configs builds an nn.Sequential.
MODELS = Registry('model', build_model_from_cfg, locations=['minimm.model'])
# Wrappers such as MMDistributedDataParallel (``model_wrapper_cfg``).
MODEL_WRAPPERS = Registry('model_wrapper', locations=['minimm.model'])
WEIGHT_INITIALIZERS = Registry('weight initializer')
OPTIMIZERS = Registry('optimizer', locations=['minimm.optim'])
OPTIM_WRAPPERS = Registry('optim wrapper', locations=['minimm.optim'])
# What builds an optim wrapper from ``optim_wrapper`` (its ``constructor`` key).
OPTIM_WRAPPER_CONSTRUCTORS = Registry('optimizer wrapper constructor',
                                      locations=['minimm.optim'])
PARAM_SCHEDULERS = Registry('parameter scheduler', build_func=build_scheduler_from_cfg,
                            locations=['minimm.optim'])
METRICS = Registry('metric', locations=['minimm.evaluator'])
# Evaluators (``val_evaluator=dict(type=..., metrics=[...])``); metrics are in METRICS.
EVALUATOR = Registry('evaluator', locations=['minimm.evaluator'])
TASK_UTILS = Registry('task util')
VISUALIZERS = Registry('visualizer', locations=['minimm.logging'])
VISBACKENDS = Registry('vis_backend', locations=['minimm.logging'])
LOG_PROCESSORS = Registry('log_processor', locations=['minimm.logging'])
INFERENCERS = Registry('inferencer')
FUNCTIONS = Registry('function', locations=['minimm.dataset'])


def _register_torch_optimizers() -> None:
    """Pre-fill OPTIMIZERS with every optimizer class in ``torch.optim`` (as MMEngine does)."""
    import torch

    for name in dir(torch.optim):
        obj = getattr(torch.optim, name)
        if inspect.isclass(obj) and issubclass(obj, torch.optim.Optimizer) \
                and obj is not torch.optim.Optimizer:
            OPTIMIZERS.register_module(name=name, module=obj)


_register_torch_optimizers()
