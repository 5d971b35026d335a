"""build_optim_wrapper: turn the ``optim_wrapper`` config into an OptimWrapper for a model.

A config looks like::

    optim_wrapper = dict(type='OptimWrapper',                  # the default; or 'AmpOptimWrapper'
                         optimizer=dict(type='SGD', lr=0.01, momentum=0.9),
                         clip_grad=None, accumulative_counts=1)

The optimizer is built from OPTIMIZERS with ``params=model.parameters()``, then the wrapper from
OPTIM_WRAPPERS with that optimizer. The caller's dicts are never changed.

Left out compared with MMEngine: optimizer wrapper *constructors* and ``paramwise_cfg``
(per-parameter lr/weight-decay multipliers), and ``OptimWrapperDict`` for several optimizers.
A config that uses ``constructor`` or ``paramwise_cfg`` is rejected with an error rather than
silently trained with one lr for all parameters.
"""
from typing import Union

import torch
from torch.optim import Optimizer

from ..registry import OPTIM_WRAPPERS, OPTIMIZERS
from .optim_wrapper import OptimWrapper

UNSUPPORTED_KEYS = ('constructor', 'paramwise_cfg')


def build_optim_wrapper(model: torch.nn.Module,
                        cfg: Union[dict, OptimWrapper, Optimizer]) -> OptimWrapper:
    """Build an OptimWrapper for ``model`` from ``cfg``.

    ``cfg`` may be a built OptimWrapper (returned as is), a built torch Optimizer (wrapped in an
    OptimWrapper), or a dict whose ``optimizer`` is a config dict or a built Optimizer.
    """
    if isinstance(cfg, OptimWrapper):
        return cfg
    if isinstance(cfg, Optimizer):
        return OptimWrapper(optimizer=cfg)
    if not isinstance(cfg, dict):
        raise TypeError('optim_wrapper should be an OptimWrapper, a torch Optimizer or a dict, '
                        f'but got {type(cfg)}')
    unsupported = [key for key in UNSUPPORTED_KEYS if key in cfg]
    if unsupported:
        raise ValueError(f'optim_wrapper keys {unsupported} are not supported by minimm (no '
                         'optimizer wrapper constructors or per-parameter settings); build the '
                         'optimizer yourself and pass it as optim_wrapper=dict(optimizer=<built>)')
    if 'optimizer' not in cfg:
        raise KeyError(f'optim_wrapper needs an `optimizer` entry, but got keys {sorted(cfg)}')

    wrapper_cfg = dict(cfg)
    wrapper_cfg.setdefault('type', 'OptimWrapper')
    optimizer = wrapper_cfg.pop('optimizer')
    if isinstance(optimizer, dict):
        # A DDP-wrapped model's parameters are those of the module inside it.
        module = model.module if hasattr(model, 'module') else model
        optimizer = OPTIMIZERS.build(optimizer, default_args=dict(params=module.parameters()))
    elif not isinstance(optimizer, Optimizer):
        raise TypeError('optim_wrapper.optimizer should be a config dict or a torch Optimizer, '
                        f'but got {type(optimizer)}')
    return OPTIM_WRAPPERS.build(wrapper_cfg, default_args=dict(optimizer=optimizer))
