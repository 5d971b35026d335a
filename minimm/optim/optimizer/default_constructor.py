"""DefaultOptimWrapperConstructor: per-parameter learning rates and weight decays from a config.

Detection and transformer schedules do not train every parameter alike: Swin's relative-position
tables and norms get no weight decay, a backbone may learn at a tenth of the head's rate, RTMDet
exempts norms and biases from decay. ``paramwise_cfg`` says so in the config::

    optim_wrapper = dict(
        optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0.05),
        paramwise_cfg=dict(custom_keys={'backbone': dict(lr_mult=0.1),
                                        'absolute_pos_embed': dict(decay_mult=0.)},
                           norm_decay_mult=0., bias_decay_mult=0.))

and the constructor turns it into one optimizer *parameter group* per parameter, each with its own
``lr``/``weight_decay``. The rules, as MMEngine 0.10 applies them to each parameter ``name`` of each
module (``prefix.name`` is its full name):

1. ``custom_keys``: the longest key that is a substring of ``prefix.name`` (ties: alphabetical)
   wins, and the other rules are skipped: ``lr = lr * lr_mult`` and, when the optimizer has a
   ``weight_decay``, ``weight_decay = weight_decay * decay_mult`` (each mult defaults to 1); every
   entry of the key's dict is also copied into the group, as MMEngine does.
2. Otherwise ``bias_lr_mult`` scales the lr of a ``bias`` that is not in a norm layer; and for the
   weight decay the first rule that applies, in this order: ``norm_decay_mult`` (any parameter of a
   BatchNorm/SyncBatchNorm, InstanceNorm, GroupNorm or LayerNorm), ``bias_decay_mult`` (a
   ``bias``), ``dwconv_decay_mult`` (a depth-wise ``Conv2d``: ``in_channels == groups``),
   ``flat_decay_mult`` (any other 1-D parameter).
3. A parameter with ``requires_grad=False`` gets a plain group (the optimizer's settings);
   ``bypass_duplicate=True`` skips a parameter already added through another module (shared
   weights), which torch would otherwise refuse.

Without ``paramwise_cfg`` the optimizer gets ``model.parameters()``, one group. Left out compared
with MMEngine: ``dcn_offset_lr_mult`` has no effect (minimm has no deformable convolutions, as
MMEngine without mmcv-full), and a constructor's registry scope.
"""
import inspect
import logging
import warnings
from typing import List, Optional

import torch
import torch.nn as nn
from torch.nn import GroupNorm, LayerNorm
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.instancenorm import _InstanceNorm

from ...logging import print_log
from ...registry import OPTIM_WRAPPER_CONSTRUCTORS, OPTIM_WRAPPERS, OPTIMIZERS
from ...utils import is_list_of
from ..optim_wrapper import OptimWrapper


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class DefaultOptimWrapperConstructor:
    """Build an OptimWrapper with per-parameter settings (see the module docstring).

    Args:
        optim_wrapper_cfg: the ``optim_wrapper`` config without ``constructor`` and
            ``paramwise_cfg``: ``type`` (default ``'OptimWrapper'``), ``optimizer`` and the
            wrapper's own arguments.
        paramwise_cfg: the rules; None or ``{}`` for one group with the optimizer's settings.
    """

    def __init__(self, optim_wrapper_cfg: dict, paramwise_cfg: Optional[dict] = None):
        if not isinstance(optim_wrapper_cfg, dict):
            raise TypeError('optimizer_cfg should be a dict', f'but got {type(optim_wrapper_cfg)}')
        if 'optimizer' not in optim_wrapper_cfg:
            raise KeyError('`optim_wrapper_cfg` must contain "optimizer" config, but got keys '
                           f'{sorted(optim_wrapper_cfg)}')
        self.optim_wrapper_cfg = optim_wrapper_cfg.copy()
        self.optimizer_cfg = self.optim_wrapper_cfg.pop('optimizer')
        self.paramwise_cfg = {} if paramwise_cfg is None else paramwise_cfg
        self.base_lr = self.optimizer_cfg.get('lr', None)
        self.base_wd = self.optimizer_cfg.get('weight_decay', None)
        self._validate_cfg()

    def _validate_cfg(self) -> None:
        """Check the rules before any parameter is seen: a mult needs the base value it scales."""
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
                        raise ValueError(f'base_wd should not be None: custom_keys[{key!r}] sets '
                                         'decay_mult, so optimizer.weight_decay must be set')
        for key in ('bias_decay_mult', 'norm_decay_mult', 'dwconv_decay_mult'):
            if key in self.paramwise_cfg and self.base_wd is None:
                raise ValueError(f'base_wd should not be None: paramwise_cfg.{key} is set, so '
                                 'optimizer.weight_decay must be set')
        # MMEngine fails later, multiplying None, at the first parameter a key matches.
        if self.base_lr is None and (self.paramwise_cfg.get('custom_keys')
                                     or 'bias_lr_mult' in self.paramwise_cfg):
            raise ValueError('base_lr should not be None: paramwise_cfg scales the lr '
                             '(custom_keys or bias_lr_mult), so optimizer.lr must be set')
        if 'dcn_offset_lr_mult' in self.paramwise_cfg:
            warnings.warn('paramwise_cfg.dcn_offset_lr_mult has no effect: minimm has no '
                          'deformable convolutions (mmcv.ops)')

    def _is_in(self, param_group: dict, param_group_list: list) -> bool:
        """Whether a parameter of ``param_group`` is already in one of ``param_group_list``."""
        if not is_list_of(param_group_list, dict):
            raise TypeError('param_group_list must be a list of dicts')
        param = set(param_group['params'])
        param_set = set()
        for group in param_group_list:
            param_set.update(set(group['params']))
        return not param.isdisjoint(param_set)

    def add_params(self, params: List[dict], module: nn.Module, prefix: str = '',
                   is_dcn_module: Optional[bool] = None) -> None:
        """Append one parameter group per parameter of ``module`` and, recursively, of its
        children to ``params``. ``is_dcn_module`` is kept for subclasses that pass it on; it
        has no effect in minimm."""
        custom_keys = self.paramwise_cfg.get('custom_keys', {})
        # Alphabetical first, then longest first: the most specific key wins, ties by name.
        sorted_keys = sorted(sorted(custom_keys.keys()), key=len, reverse=True)

        bias_lr_mult = self.paramwise_cfg.get('bias_lr_mult', None)
        bias_decay_mult = self.paramwise_cfg.get('bias_decay_mult', None)
        norm_decay_mult = self.paramwise_cfg.get('norm_decay_mult', None)
        dwconv_decay_mult = self.paramwise_cfg.get('dwconv_decay_mult', None)
        flat_decay_mult = self.paramwise_cfg.get('flat_decay_mult', None)
        bypass_duplicate = self.paramwise_cfg.get('bypass_duplicate', False)

        is_norm = isinstance(module, (_BatchNorm, _InstanceNorm, GroupNorm, LayerNorm))
        is_dwconv = isinstance(module, torch.nn.Conv2d) and module.in_channels == module.groups

        for name, param in module.named_parameters(recurse=False):
            param_group = {'params': [param]}
            if bypass_duplicate and self._is_in(param_group, params):
                print_log(f'{prefix} is duplicate. It is skipped since '
                          f'bypass_duplicate={bypass_duplicate}', logger='current',
                          level=logging.WARNING)
                continue
            if not param.requires_grad:
                params.append(param_group)
                continue

            # A parameter that matches a custom key ignores the other rules.
            is_custom = False
            for key in sorted_keys:
                if key in f'{prefix}.{name}':
                    is_custom = True
                    lr_mult = custom_keys[key].get('lr_mult', 1.)
                    param_group['lr'] = self.base_lr * lr_mult
                    if self.base_wd is not None:
                        decay_mult = custom_keys[key].get('decay_mult', 1.)
                        param_group['weight_decay'] = self.base_wd * decay_mult
                    for k, v in custom_keys[key].items():
                        param_group[k] = v
                    break

            if not is_custom:
                if name == 'bias' and not is_norm and bias_lr_mult is not None:
                    param_group['lr'] = self.base_lr * bias_lr_mult
                if self.base_wd is not None:
                    if is_norm and norm_decay_mult is not None:
                        param_group['weight_decay'] = self.base_wd * norm_decay_mult
                    elif name == 'bias' and bias_decay_mult is not None:
                        param_group['weight_decay'] = self.base_wd * bias_decay_mult
                    elif is_dwconv and dwconv_decay_mult is not None:
                        param_group['weight_decay'] = self.base_wd * dwconv_decay_mult
                    elif param.ndim == 1 and flat_decay_mult is not None:
                        param_group['weight_decay'] = self.base_wd * flat_decay_mult
            params.append(param_group)
            for key, value in param_group.items():
                if key == 'params':
                    continue
                full_name = f'{prefix}.{name}' if prefix else name
                print_log(f'paramwise_options -- {full_name}:{key}={value}', logger='current')

        for child_name, child_mod in module.named_children():
            child_prefix = f'{prefix}.{child_name}' if prefix else child_name
            self.add_params(params, child_mod, prefix=child_prefix, is_dcn_module=False)

    def __call__(self, model: nn.Module) -> OptimWrapper:
        if hasattr(model, 'module'):
            model = model.module

        optim_wrapper_cfg = self.optim_wrapper_cfg.copy()
        optim_wrapper_cfg.setdefault('type', 'OptimWrapper')
        optimizer_cfg = self.optimizer_cfg.copy()
        optimizer_cls = self.optimizer_cfg['type']
        if isinstance(optimizer_cls, str):
            optimizer_cls = OPTIMIZERS.get(optimizer_cls)
            if optimizer_cls is None:
                raise KeyError(OPTIMIZERS.not_found_message(self.optimizer_cfg['type']))
        # Some optimizers (colossalai's HybridAdam) call their first argument ``model_params``:
        # fill whatever the first argument is called, as MMEngine does.
        first_arg_name = next(iter(inspect.signature(optimizer_cls).parameters))
        if not self.paramwise_cfg:
            optimizer_cfg[first_arg_name] = model.parameters()
        else:
            params: List = []
            self.add_params(params, model)
            optimizer_cfg[first_arg_name] = params
        optimizer = OPTIMIZERS.build(optimizer_cfg)
        return OPTIM_WRAPPERS.build(optim_wrapper_cfg, default_args=dict(optimizer=optimizer))
