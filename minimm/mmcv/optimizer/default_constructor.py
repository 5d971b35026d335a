"""DefaultOptimizerConstructor: an optimizer from a config, with per-parameter settings.

Without ``paramwise_cfg`` every parameter shares the optimizer's settings (one param group).
With it, each parameter becomes its own group, in ``model.named_parameters()`` order (frozen
ones included, with the defaults), and its lr and weight decay follow these rules:

- ``custom_keys``: ``{key: dict(lr_mult=..., decay_mult=...)}``. A parameter whose full name
  contains ``key`` gets ``lr * lr_mult`` and ``weight_decay * decay_mult``, and no other rule
  applies. Of several matching keys the longest wins, then the alphabetically first.
- ``bias_lr_mult``: on the lr of every ``bias`` outside normalization layers and DCN offsets.
- ``bias_decay_mult``: on the weight decay of those biases (not in depthwise convs either).
- ``norm_decay_mult``: on the weight decay of the weights and biases of normalization layers.
- ``dwconv_decay_mult``: on the weight decay of depthwise ``Conv2d`` layers.
- ``dcn_offset_lr_mult``: on the lr of the ``conv_offset`` layers of deformable convolutions
  (it overrides ``bias_lr_mult`` there).
- ``bypass_duplicate``: skip, with a warning, a parameter already in a group (a shared module),
  which the optimizer would otherwise refuse.

As MMCV 1.7. Different: minimm has no deformable convolution ops, so a DCN is recognised by its
class name (MMCV's ``DeformConv2d``/``ModulatedDeformConv2d`` or subclasses: ``mmcv.ops`` layers
in a model are still found without importing mmcv).
"""
import warnings
from typing import Dict, List, Optional, Union

import torch
import torch.nn as nn
from torch.nn import GroupNorm, LayerNorm
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.instancenorm import _InstanceNorm

from ..builder import build_from_cfg
from .builder import OPTIMIZER_BUILDERS, OPTIMIZERS


def _is_dcn(module: nn.Module) -> bool:
    return any(cls.__name__ in ('DeformConv2d', 'ModulatedDeformConv2d')
               for cls in type(module).__mro__)


@OPTIMIZER_BUILDERS.register_module()
class DefaultOptimizerConstructor:
    """Build ``optimizer_cfg`` (``type`` and the optimizer's arguments) for a model, with the
    per-parameter rules of ``paramwise_cfg``.

    Example::

        optimizer_cfg = dict(type='SGD', lr=0.01, weight_decay=0.95)
        paramwise_cfg = dict(custom_keys={'backbone': dict(lr_mult=0.1, decay_mult=0.9)})
        optimizer = DefaultOptimizerConstructor(optimizer_cfg, paramwise_cfg)(model)
        # model.backbone: lr 0.01 * 0.1, weight decay 0.95 * 0.9; the rest 0.01 and 0.95
    """

    def __init__(self, optimizer_cfg: Dict, paramwise_cfg: Optional[Dict] = None):
        if not isinstance(optimizer_cfg, dict):
            raise TypeError('optimizer_cfg should be a dict', f'but got {type(optimizer_cfg)}')
        self.optimizer_cfg = optimizer_cfg
        self.paramwise_cfg = {} if paramwise_cfg is None else paramwise_cfg
        self.base_lr = optimizer_cfg.get('lr', None)
        self.base_wd = optimizer_cfg.get('weight_decay', None)
        self._validate_cfg()

    def _validate_cfg(self) -> None:
        if not isinstance(self.paramwise_cfg, dict):
            raise TypeError('paramwise_cfg should be None or a dict, '
                            f'but got {type(self.paramwise_cfg)}')

        if 'custom_keys' in self.paramwise_cfg:
            if not isinstance(self.paramwise_cfg['custom_keys'], dict):
                raise TypeError('If specified, custom_keys must be a dict, '
                                f'but got {type(self.paramwise_cfg["custom_keys"])}')
            if self.base_wd is None:
                for key in self.paramwise_cfg['custom_keys']:
                    if 'decay_mult' in self.paramwise_cfg['custom_keys'][key]:
                        raise ValueError('base_wd should not be None')

        # a decay multiplier needs a weight decay to multiply
        if ('bias_decay_mult' in self.paramwise_cfg
                or 'norm_decay_mult' in self.paramwise_cfg
                or 'dwconv_decay_mult' in self.paramwise_cfg):
            if self.base_wd is None:
                raise ValueError('base_wd should not be None')

    def _is_in(self, param_group: Dict, param_group_list: List) -> bool:
        assert all(isinstance(group, dict) for group in param_group_list)
        param = set(param_group['params'])
        param_set = set()
        for group in param_group_list:
            param_set.update(set(group['params']))

        return not param.isdisjoint(param_set)

    def add_params(self, params: List[Dict], module: nn.Module, prefix: str = '',
                   is_dcn_module: Union[int, float, None] = None) -> None:
        """Append a param group for each parameter of ``module`` and, recursively, of its
        children to ``params``.

        Args:
            params: the param groups so far, extended in place.
            module: the module whose parameters are added.
            prefix: the module's name in the model.
            is_dcn_module: whether ``module``'s parent is a DCN (its ``conv_offset`` then gets
                ``dcn_offset_lr_mult``).
        """
        custom_keys = self.paramwise_cfg.get('custom_keys', {})
        # alphabetical first, then the longest first: the sort is stable
        sorted_keys = sorted(sorted(custom_keys.keys()), key=len, reverse=True)

        bias_lr_mult = self.paramwise_cfg.get('bias_lr_mult', 1.)
        bias_decay_mult = self.paramwise_cfg.get('bias_decay_mult', 1.)
        norm_decay_mult = self.paramwise_cfg.get('norm_decay_mult', 1.)
        dwconv_decay_mult = self.paramwise_cfg.get('dwconv_decay_mult', 1.)
        bypass_duplicate = self.paramwise_cfg.get('bypass_duplicate', False)
        dcn_offset_lr_mult = self.paramwise_cfg.get('dcn_offset_lr_mult', 1.)

        # the special rules of normalization layers and depthwise convolutions
        is_norm = isinstance(module, (_BatchNorm, _InstanceNorm, GroupNorm, LayerNorm))
        is_dwconv = (isinstance(module, torch.nn.Conv2d)
                     and module.in_channels == module.groups)

        for name, param in module.named_parameters(recurse=False):
            param_group = {'params': [param]}
            if not param.requires_grad:
                params.append(param_group)
                continue
            if bypass_duplicate and self._is_in(param_group, params):
                warnings.warn(f'{prefix} is duplicate. It is skipped since '
                              f'bypass_duplicate={bypass_duplicate}')
                continue
            # a matching custom key overrides every other rule
            is_custom = False
            for key in sorted_keys:
                if key in f'{prefix}.{name}':
                    is_custom = True
                    lr_mult = custom_keys[key].get('lr_mult', 1.)
                    param_group['lr'] = self.base_lr * lr_mult
                    if self.base_wd is not None:
                        decay_mult = custom_keys[key].get('decay_mult', 1.)
                        param_group['weight_decay'] = self.base_wd * decay_mult
                    break

            if not is_custom:
                # bias_lr_mult: every bias but those of norm layers and DCN offsets
                if name == 'bias' and not (is_norm or is_dcn_module):
                    param_group['lr'] = self.base_lr * bias_lr_mult

                if (prefix.find('conv_offset') != -1 and is_dcn_module
                        and isinstance(module, torch.nn.Conv2d)):
                    # both the weight and the bias of a DCN's offset layer
                    param_group['lr'] = self.base_lr * dcn_offset_lr_mult

                if self.base_wd is not None:
                    if is_norm:
                        param_group['weight_decay'] = self.base_wd * norm_decay_mult
                    elif is_dwconv:
                        param_group['weight_decay'] = self.base_wd * dwconv_decay_mult
                    elif name == 'bias' and not is_dcn_module:
                        # as in MMCV, also on the bias of a DCN itself (not of its offset layer)
                        param_group['weight_decay'] = self.base_wd * bias_decay_mult
            params.append(param_group)

        is_dcn_module = _is_dcn(module)
        for child_name, child_mod in module.named_children():
            child_prefix = f'{prefix}.{child_name}' if prefix else child_name
            self.add_params(params, child_mod, prefix=child_prefix, is_dcn_module=is_dcn_module)

    def __call__(self, model: nn.Module):
        if hasattr(model, 'module'):
            model = model.module

        optimizer_cfg = self.optimizer_cfg.copy()
        # no paramwise options: the global settings, one group
        if not self.paramwise_cfg:
            optimizer_cfg['params'] = model.parameters()
            return build_from_cfg(optimizer_cfg, OPTIMIZERS)

        # per-parameter lr and weight decay, recursively
        params: List[Dict] = []
        self.add_params(params, model)
        optimizer_cfg['params'] = params

        return build_from_cfg(optimizer_cfg, OPTIMIZERS)
