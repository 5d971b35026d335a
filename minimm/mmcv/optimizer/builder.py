"""``OPTIMIZERS`` and ``OPTIMIZER_BUILDERS``, MMCV 1.x's own registries, and the two builders.

``build_optimizer(model, cfg)`` pops ``constructor`` (default ``'DefaultOptimizerConstructor'``)
and ``paramwise_cfg`` from a copy of ``cfg``, builds the constructor with the rest as
``optimizer_cfg``, and calls it on the model. Left out compared with MMCV 1.7: the Ascend NPU
optimizers (``torch_npu``).
"""
import copy
import inspect
from typing import Dict, List

import torch

from minimm.registry import Registry

from ..builder import build_from_cfg

OPTIMIZERS = Registry('optimizer', build_func=build_from_cfg)
OPTIMIZER_BUILDERS = Registry('optimizer builder', build_func=build_from_cfg)


def register_torch_optimizers() -> List:
    """Register every ``torch.optim.Optimizer`` class of ``torch.optim``; return their names."""
    torch_optimizers = []
    for module_name in dir(torch.optim):
        if module_name.startswith('__'):
            continue
        _optim = getattr(torch.optim, module_name)
        if inspect.isclass(_optim) and issubclass(_optim, torch.optim.Optimizer):
            OPTIMIZERS.register_module()(_optim)
            torch_optimizers.append(module_name)
    return torch_optimizers


TORCH_OPTIMIZERS = register_torch_optimizers()


def build_optimizer_constructor(cfg: Dict):
    return build_from_cfg(cfg, OPTIMIZER_BUILDERS)


def build_optimizer(model, cfg: Dict):
    optimizer_cfg = copy.deepcopy(cfg)
    constructor_type = optimizer_cfg.pop('constructor', 'DefaultOptimizerConstructor')
    paramwise_cfg = optimizer_cfg.pop('paramwise_cfg', None)
    optim_constructor = build_optimizer_constructor(
        dict(type=constructor_type, optimizer_cfg=optimizer_cfg, paramwise_cfg=paramwise_cfg))
    optimizer = optim_constructor(model)
    return optimizer
