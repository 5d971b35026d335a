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

import torch.nn as nn
from torch.nn import GroupNorm, LayerNorm

from ...logging import print_log
from ...registry import OPTIM_WRAPPER_CONSTRUCTORS, OPTIM_WRAPPERS, OPTIMIZERS
from ...utils import is_list_of
from ...utils.dl_utils.parrots_wrapper import _BatchNorm, _InstanceNorm
from ..optim_wrapper import OptimWrapper

_NORM_LAYERS = (_BatchNorm, _InstanceNorm, GroupNorm, LayerNorm)


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
        # The wrapper's part and the optimizer's part, split once; the caller's dict is kept.
        self.optim_wrapper_cfg = {k: v for k, v in optim_wrapper_cfg.items() if k != 'optimizer'}
        self.optimizer_cfg = optim_wrapper_cfg['optimizer']
        self.paramwise_cfg = paramwise_cfg if paramwise_cfg is not None else {}
        # What the multipliers multiply.
        self.base_lr = self.optimizer_cfg.get('lr')
        self.base_wd = self.optimizer_cfg.get('weight_decay')
        self._validate_cfg()

    def _validate_cfg(self) -> None:
        """Fail before any parameter is seen when a multiplier has no base value to scale."""
        cfg = self.paramwise_cfg
        if not isinstance(cfg, dict):
            raise TypeError(f'paramwise_cfg should be None or a dict, but got {type(cfg)}')
        custom_keys = cfg.get('custom_keys', {})
        if not isinstance(custom_keys, dict):
            raise TypeError('If specified, custom_keys must be a dict, '
                            f'but got {type(custom_keys)}')
        if self.base_wd is None:
            for key, mults in custom_keys.items():
                if 'decay_mult' in mults:
                    raise ValueError(f'base_wd should not be None: custom_keys[{key!r}] sets '
                                     'decay_mult, so optimizer.weight_decay must be set')
            for option in ('bias_decay_mult', 'norm_decay_mult', 'dwconv_decay_mult'):
                if option in cfg:
                    raise ValueError(f'base_wd should not be None: paramwise_cfg.{option} is '
                                     'set, so optimizer.weight_decay must be set')
        # MMEngine fails later, multiplying None, at the first parameter a key matches.
        if self.base_lr is None and (custom_keys or 'bias_lr_mult' in cfg):
            raise ValueError('base_lr should not be None: paramwise_cfg scales the lr '
                             '(custom_keys or bias_lr_mult), so optimizer.lr must be set')
        if 'dcn_offset_lr_mult' in cfg:
            warnings.warn('paramwise_cfg.dcn_offset_lr_mult has no effect: minimm has no '
                          'deformable convolutions (mmcv.ops)')

    def _is_in(self, param_group: dict, param_group_list: list) -> bool:
        """Whether a parameter of ``param_group`` is already in one of ``param_group_list``."""
        if not is_list_of(param_group_list, dict):
            raise TypeError('param_group_list must be a list of dicts')
        taken = {param for group in param_group_list for param in group['params']}
        return any(param in taken for param in param_group['params'])

    def add_params(self, params: List[dict], module: nn.Module, prefix: str = '',
                   is_dcn_module: Optional[bool] = None) -> None:
        """Append one parameter group per parameter of ``module`` and, recursively, of its
        children to ``params``. ``is_dcn_module`` is kept for subclasses that pass it on; it
        has no effect in minimm."""
        for name, param in module.named_parameters(recurse=False):
            group = {'params': [param]}
            # MMEngine checks for a duplicate first, so a shared frozen tensor is skipped too.
            if self.paramwise_cfg.get('bypass_duplicate', False) and self._is_in(group, params):
                print_log(f'{prefix} is duplicate. It is skipped since bypass_duplicate=True',
                          logger='current', level=logging.WARNING)
                continue
            if not param.requires_grad:
                params.append(group)  # frozen: the optimizer's defaults, nothing logged
                continue
            group.update(self._options(module, prefix, name, param))
            params.append(group)
            full_name = f'{prefix}.{name}' if prefix else name
            for option, value in group.items():
                if option != 'params':
                    print_log(f'paramwise_options -- {full_name}:{option}={value}',
                              logger='current')

        for child_name, child in module.named_children():
            child_prefix = f'{prefix}.{child_name}' if prefix else child_name
            self.add_params(params, child, prefix=child_prefix, is_dcn_module=False)

    def _options(self, module: nn.Module, prefix: str, name: str, param) -> dict:
        """The settings that one trainable parameter's group adds to ``params``."""
        custom_keys = self.paramwise_cfg.get('custom_keys', {})
        for key in sorted(custom_keys, key=lambda k: (-len(k), k)):
            if key in f'{prefix}.{name}':
                entry = custom_keys[key]
                options = {'lr': self.base_lr * entry.get('lr_mult', 1.)}
                if self.base_wd is not None:
                    options['weight_decay'] = self.base_wd * entry.get('decay_mult', 1.)
                options.update(entry)  # as MMEngine: the key's own entries go in too
                return options

        def mult(option):
            return self.paramwise_cfg.get(option)

        options = {}
        is_norm = isinstance(module, _NORM_LAYERS)
        if name == 'bias' and not is_norm and mult('bias_lr_mult') is not None:
            options['lr'] = self.base_lr * mult('bias_lr_mult')
        if self.base_wd is None:
            return options
        # The first rule that applies and is set decides the weight decay.
        is_dwconv = isinstance(module, nn.Conv2d) and module.in_channels == module.groups
        for applies, option in ((is_norm, 'norm_decay_mult'), (name == 'bias', 'bias_decay_mult'),
                                (is_dwconv, 'dwconv_decay_mult'),
                                (param.ndim == 1, 'flat_decay_mult')):
            if applies and mult(option) is not None:
                options['weight_decay'] = self.base_wd * mult(option)
                break
        return options

    def _optimizer_class(self):
        optimizer_type = self.optimizer_cfg['type']
        if not isinstance(optimizer_type, str):
            return optimizer_type
        optimizer_cls = OPTIMIZERS.get(optimizer_type)
        if optimizer_cls is None:
            raise KeyError(OPTIMIZERS.not_found_message(optimizer_type))
        return optimizer_cls

    def __call__(self, model: nn.Module) -> OptimWrapper:
        if hasattr(model, 'module'):  # DataParallel / DistributedDataParallel
            model = model.module
        # The first argument is ``params`` for torch's optimizers, but ``model_params`` for some
        # (colossalai's HybridAdam): fill whatever it is called, as MMEngine does.
        first_arg = next(iter(inspect.signature(self._optimizer_class()).parameters))
        if self.paramwise_cfg:
            groups: List[dict] = []
            self.add_params(groups, model)
        else:
            groups = model.parameters()  # one group with the optimizer's settings
        optimizer = OPTIMIZERS.build({**self.optimizer_cfg, first_arg: groups})
        wrapper_cfg = {'type': 'OptimWrapper', **self.optim_wrapper_cfg}
        return OPTIM_WRAPPERS.build(wrapper_cfg, default_args=dict(optimizer=optimizer))
