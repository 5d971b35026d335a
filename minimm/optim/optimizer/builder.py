"""build_optim_wrapper: turn the ``optim_wrapper`` config into an OptimWrapper for a model.

A config looks like::

    optim_wrapper = dict(type='OptimWrapper',                  # the default; or 'AmpOptimWrapper'
                         optimizer=dict(type='SGD', lr=0.01, momentum=0.9),
                         clip_grad=None, accumulative_counts=1,
                         paramwise_cfg=dict(norm_decay_mult=0.),   # optional
                         constructor='DefaultOptimWrapperConstructor')  # the default

As in MMEngine 0.10, ``constructor`` names a class in OPTIM_WRAPPER_CONSTRUCTORS, which is built
with ``optim_wrapper_cfg`` (the rest of the config) and ``paramwise_cfg``, then called with the
model; the default one is ``default_constructor.py``. The caller's dicts are never changed.

Beyond MMEngine, ``cfg`` may also be a built OptimWrapper (returned as is), a built torch
Optimizer, or a dict whose ``optimizer`` is a built Optimizer (wrapped in an OptimWrapper). Left
out: ``OptimWrapperDict`` for several optimizers.
"""
import copy
from typing import Union

import torch
from torch.optim import Optimizer

from ...registry import OPTIM_WRAPPER_CONSTRUCTORS, OPTIM_WRAPPERS
from ..optim_wrapper import OptimWrapper


def build_optim_wrapper(model: torch.nn.Module,
                        cfg: Union[dict, OptimWrapper, Optimizer]) -> OptimWrapper:
    """Build an OptimWrapper for ``model`` from ``cfg`` through its ``constructor``."""
    if isinstance(cfg, OptimWrapper):
        return cfg
    if isinstance(cfg, Optimizer):
        return OptimWrapper(optimizer=cfg)
    if not isinstance(cfg, dict):
        raise TypeError('optim_wrapper should be an OptimWrapper, a torch Optimizer or a dict, '
                        f'but got {type(cfg)}')
    if 'optimizer' not in cfg:
        raise KeyError(f'optim_wrapper needs an `optimizer` entry, but got keys {sorted(cfg)}')
    optimizer = cfg['optimizer']
    if isinstance(optimizer, Optimizer):
        if 'constructor' in cfg or 'paramwise_cfg' in cfg:
            raise ValueError('optim_wrapper: `constructor` and `paramwise_cfg` build the '
                             'optimizer, so `optimizer` must be a config dict, not a built '
                             f'{type(optimizer).__name__}')
        wrapper_cfg = dict(cfg)
        wrapper_cfg.setdefault('type', 'OptimWrapper')
        return OPTIM_WRAPPERS.build(wrapper_cfg)
    if not isinstance(optimizer, dict):
        raise TypeError('optim_wrapper.optimizer should be a config dict or a torch Optimizer, '
                        f'but got {type(optimizer)}')
    optim_wrapper_cfg = copy.deepcopy(dict(cfg))
    constructor_type = optim_wrapper_cfg.pop('constructor', 'DefaultOptimWrapperConstructor')
    paramwise_cfg = optim_wrapper_cfg.pop('paramwise_cfg', None)
    optim_wrapper_constructor = OPTIM_WRAPPER_CONSTRUCTORS.build(
        dict(type=constructor_type, optim_wrapper_cfg=optim_wrapper_cfg,
             paramwise_cfg=paramwise_cfg))
    return optim_wrapper_constructor(model)
