"""MMCV 1.x's optimizer registries and the two functions that build from them.

``OPTIMIZERS`` holds every optimizer class of ``torch.optim`` (registered when this module is
imported) and any a project adds. ``OPTIMIZER_BUILDERS`` holds *constructors*: objects built from
the config that, called with the model, return the optimizer (``DefaultOptimizerConstructor``
unless the config names another with ``constructor=``). Left out: MMCV's Ascend NPU optimizers.
"""
import copy
import inspect
from typing import Dict, List

import torch

from minimm.registry import Registry

from ..registry import build_from_cfg

OPTIMIZERS = Registry('optimizer', build_func=build_from_cfg)
OPTIMIZER_BUILDERS = Registry('optimizer builder', build_func=build_from_cfg)


def register_torch_optimizers() -> List:
    """Register each ``torch.optim.Optimizer`` subclass that ``torch.optim`` exports; return
    their names."""
    names = []
    for name in dir(torch.optim):
        candidate = getattr(torch.optim, name)
        if inspect.isclass(candidate) and issubclass(candidate, torch.optim.Optimizer):
            OPTIMIZERS.register_module()(candidate)
            names.append(name)
    return names


TORCH_OPTIMIZERS = register_torch_optimizers()


def build_optimizer_constructor(cfg: Dict):
    return OPTIMIZER_BUILDERS.build(cfg)


def build_optimizer(model, cfg: Dict):
    """Build the optimizer of ``model`` from a config's ``optimizer`` dict: ``type`` and the
    optimizer's arguments, optionally ``constructor`` and ``paramwise_cfg``. ``cfg`` itself is
    not changed."""
    optimizer_cfg = copy.deepcopy(cfg)
    constructor = build_optimizer_constructor(
        dict(type=optimizer_cfg.pop('constructor', 'DefaultOptimizerConstructor'),
             paramwise_cfg=optimizer_cfg.pop('paramwise_cfg', None),
             optimizer_cfg=optimizer_cfg))
    return constructor(model)
