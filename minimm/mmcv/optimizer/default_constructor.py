"""DefaultOptimizerConstructor: an optimizer built from a config, with per-parameter settings.

Without ``paramwise_cfg`` all parameters share the optimizer's settings (one param group). With
it, every parameter gets a group of its own, in ``model.named_parameters()`` order (frozen ones
too, with the optimizer's defaults), and its lr and weight decay follow these rules:

- ``custom_keys``: ``{key: dict(lr_mult=..., decay_mult=...)}``. A parameter whose full name
  contains ``key`` gets ``lr * lr_mult`` and ``weight_decay * decay_mult``, and no other rule
  applies. Of several matching keys the longest wins, then the alphabetically first.
- ``bias_lr_mult``: the lr of every ``bias`` outside normalization layers and DCNs.
- ``norm_decay_mult``: the weight decay of normalization layers (weights and biases);
  ``dwconv_decay_mult`` of depthwise ``Conv2d`` layers; ``bias_decay_mult`` of other biases.
- ``dcn_offset_lr_mult``: the lr of the ``conv_offset`` layer of a deformable convolution.
- ``bypass_duplicate``: skip, with a warning, a parameter already in a group (a module shared
  by two parents), which torch's optimizers would refuse.

As MMCV 1.7. Different: minimm has no deformable convolution ops, so a DCN is recognised by its
class name (``DeformConv2d``/``ModulatedDeformConv2d`` or a subclass: ``mmcv.ops`` layers are
found without importing mmcv); and the ``bypass_duplicate`` warning is shown even when warnings
are filtered out (see ``_warn_always``).
"""
import re
import warnings
from typing import Dict, List, Optional, Union

import torch.nn as nn
from torch.nn import GroupNorm, LayerNorm
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.instancenorm import _InstanceNorm

from ..registry import build_from_cfg
from .builder import OPTIMIZER_BUILDERS, OPTIMIZERS

_NORM_LAYERS = (_BatchNorm, _InstanceNorm, GroupNorm, LayerNorm)


def _is_dcn(module: nn.Module) -> bool:
    return any(cls.__name__ in ('DeformConv2d', 'ModulatedDeformConv2d')
               for cls in type(module).__mro__)


def _warn_always(message: str) -> None:
    """``warnings.warn``, with a filter for this one message put before the user's: skipping a
    parameter changes how a model is trained, so it is said even under ``python -W ignore``
    (how the MMCV peer suite runs MMCV's test that counts this warning)."""
    with warnings.catch_warnings():
        warnings.filterwarnings('always', message=re.escape(message))
        warnings.warn(message, stacklevel=3)


@OPTIMIZER_BUILDERS.register_module()
class DefaultOptimizerConstructor:
    """Called with a model, build ``optimizer_cfg`` (``type`` and the optimizer's arguments)
    with the per-parameter rules of ``paramwise_cfg``.

    Example::

        optimizer_cfg = dict(type='SGD', lr=0.01, weight_decay=0.95)
        paramwise_cfg = dict(custom_keys={'backbone': dict(lr_mult=0.1, decay_mult=0.9)})
        optimizer = DefaultOptimizerConstructor(optimizer_cfg, paramwise_cfg)(model)
        # model.backbone: lr 0.001, weight decay 0.855; the rest lr 0.01, weight decay 0.95
    """

    def __init__(self, optimizer_cfg: Dict, paramwise_cfg: Optional[Dict] = None):
        if not isinstance(optimizer_cfg, dict):
            raise TypeError('optimizer_cfg should be a dict', f'but got {type(optimizer_cfg)}')
        self.optimizer_cfg = optimizer_cfg
        self.paramwise_cfg = paramwise_cfg if paramwise_cfg is not None else {}
        # What the multipliers multiply.
        self.base_lr = optimizer_cfg.get('lr')
        self.base_wd = optimizer_cfg.get('weight_decay')
        self._validate_cfg()

    def _validate_cfg(self) -> None:
        cfg = self.paramwise_cfg
        if not isinstance(cfg, dict):
            raise TypeError(f'paramwise_cfg should be None or a dict, but got {type(cfg)}')
        custom_keys = cfg.get('custom_keys', {})
        if not isinstance(custom_keys, dict):
            raise TypeError('If specified, custom_keys must be a dict, '
                            f'but got {type(custom_keys)}')
        # A decay multiplier needs a weight decay to multiply.
        wants_decay = (any('decay_mult' in options for options in custom_keys.values())
                       or any(key in cfg for key in
                              ('bias_decay_mult', 'norm_decay_mult', 'dwconv_decay_mult')))
        if wants_decay and self.base_wd is None:
            raise ValueError('base_wd should not be None')

    def _is_in(self, param_group: Dict, param_group_list: List) -> bool:
        """Whether a parameter of ``param_group`` is already in one of the groups."""
        assert all(isinstance(group, dict) for group in param_group_list)
        taken = {param for group in param_group_list for param in group['params']}
        return any(param in taken for param in param_group['params'])

    def add_params(self, params: List[Dict], module: nn.Module,
                   prefix: str = '', is_dcn_module: Union[int, float, None] = None) -> None:
        """Append to ``params`` one group per parameter of ``module`` and, recursively, of its
        children. ``prefix`` is the module's name in the model; ``is_dcn_module`` says whether
        its parent is a DCN."""
        for name, param in module.named_parameters(recurse=False):
            group = {'params': [param]}
            if not param.requires_grad:
                params.append(group)  # frozen: the optimizer's defaults, no rule
                continue
            if self.paramwise_cfg.get('bypass_duplicate', False) and self._is_in(group, params):
                _warn_always(f'{prefix} is duplicate. It is skipped since bypass_duplicate=True')
                continue
            group.update(self._options(module, prefix, name, is_dcn_module))
            params.append(group)

        parent_is_dcn = _is_dcn(module)
        for child_name, child in module.named_children():
            child_prefix = f'{prefix}.{child_name}' if prefix else child_name
            self.add_params(params, child, prefix=child_prefix, is_dcn_module=parent_is_dcn)

    def _options(self, module: nn.Module, prefix: str, name: str, in_dcn) -> Dict:
        """``lr`` and ``weight_decay`` of the trainable parameter ``name`` of ``module``
        (a key left out means the optimizer's own setting)."""
        cfg = self.paramwise_cfg
        custom_keys = cfg.get('custom_keys', {})
        for key in sorted(custom_keys, key=lambda k: (-len(k), k)):
            if key not in f'{prefix}.{name}':
                continue
            mults = custom_keys[key]
            options = {'lr': self.base_lr * mults.get('lr_mult', 1.)}
            if self.base_wd is not None:
                options['weight_decay'] = self.base_wd * mults.get('decay_mult', 1.)
            return options

        options = {}
        is_norm = isinstance(module, _NORM_LAYERS)
        is_conv = isinstance(module, nn.Conv2d)
        if name == 'bias' and not (is_norm or in_dcn):
            options['lr'] = self.base_lr * cfg.get('bias_lr_mult', 1.)
        if is_conv and in_dcn and 'conv_offset' in prefix:
            # the offset layer of a DCN: its weight and its bias
            options['lr'] = self.base_lr * cfg.get('dcn_offset_lr_mult', 1.)
        if self.base_wd is None:
            return options
        if is_norm:
            options['weight_decay'] = self.base_wd * cfg.get('norm_decay_mult', 1.)
        elif is_conv and module.in_channels == module.groups:
            options['weight_decay'] = self.base_wd * cfg.get('dwconv_decay_mult', 1.)
        elif name == 'bias' and not in_dcn:
            # as MMCV: this includes the bias of a DCN itself (only its offset layer is left out)
            options['weight_decay'] = self.base_wd * cfg.get('bias_decay_mult', 1.)
        return options

    def __call__(self, model: nn.Module):
        if hasattr(model, 'module'):  # DataParallel / DistributedDataParallel
            model = model.module
        optimizer_cfg = self.optimizer_cfg.copy()
        if self.paramwise_cfg:
            groups: List[Dict] = []
            self.add_params(groups, model)
            optimizer_cfg['params'] = groups
        else:
            optimizer_cfg['params'] = model.parameters()  # one group, the optimizer's settings
        return build_from_cfg(optimizer_cfg, OPTIMIZERS)
